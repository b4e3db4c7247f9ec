import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { closeSync, openSync, readdirSync, readSync, rmSync, writeSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import type { TestContext } from "node:test";

const madeDirs: string[] = [];
// `t.after` hooks run in the order they were added, so the cleanup added first runs while a store
// closed by a later hook is still open: its checkpoint timer may write into the directory during
// the removal (ENOTEMPTY), and its close rewrites the checkpoint (recreating the directory). The
// cleanup therefore never fails a test, and every directory is removed again when the test file's
// process ends.
process.on("exit", () => {
  for (const d of madeDirs) {
    try {
      rmSync(d, { recursive: true, force: true, maxRetries: 3 });
    } catch {
      // nothing else runs at exit; a directory that still cannot be removed is left to the OS
    }
  }
});

/** A fresh temp directory; call the returned cleanup (or let the test's `after` do it). */
export async function tempDir(prefix = "actormq-test-"): Promise<{ dir: string; cleanup: () => Promise<void> }> {
  const dir = await mkdtemp(path.join(tmpdir(), prefix));
  madeDirs.push(dir);
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true, maxRetries: 3, retryDelay: 10 }).catch(() => {}) };
}

/**
 * Flips the `mask` bits of the commit-log byte at offset `phy`, in place: bit rot a store finds
 * whether it is closed or running (the file changes, not anything the store holds). The segment
 * holding `phy` is the file with the largest start offset (its 20-digit name) not above it.
 */
export function flipCommitLogByte(commitLogDir: string, phy: number, mask = 0x10): void {
  const start = Math.max(
    ...readdirSync(commitLogDir)
      .map(Number)
      .filter((s) => s <= phy),
  );
  const fd = openSync(path.join(commitLogDir, String(start).padStart(20, "0")), "r+");
  try {
    const one = Buffer.alloc(1);
    readSync(fd, one, 0, 1, phy - start);
    one[0]! ^= mask;
    writeSync(fd, one, 0, 1, phy - start);
  } finally {
    closeSync(fd);
  }
}

/** An ephemeral loopback endpoint: ZeroMQ binds a free port and reports the real one. */
export const EPHEMERAL = "tcp://127.0.0.1:*";

/** Polls `cond` until it returns truthy or `timeoutMs` passes; never a fixed sleep. */
export async function waitFor<T>(
  cond: () => T | Promise<T>,
  timeoutMs = 10_000,
  what = "condition",
  intervalMs = 10,
): Promise<NonNullable<T>> {
  // performance.now(): tests that step the wall clock (fakeWallClock) wait in real time too
  const t0 = performance.now();
  for (;;) {
    const v = await cond();
    if (v) return v as NonNullable<T>;
    if (performance.now() - t0 > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/**
 * Fakes wall clock steps (NTP, a VM resume, a user setting the time): Date.now() reads real time plus
 * an offset that `jump(ms)` moves. Timers and performance.now() stay on real time, as they do when
 * the clock is stepped. Call `restore()` in a finally or after hook.
 */
export function fakeWallClock(): { jump: (ms: number) => void; restore: () => void } {
  const realNow = Date.now;
  let offset = 0;
  Date.now = () => realNow() + offset;
  return {
    jump: (ms) => {
      offset += ms;
    },
    restore: () => {
      Date.now = realNow;
    },
  };
}

/**
 * Makes the code's monotonic clock (monotonicNow, transport/clock.ts) read Date.now() for the rest of
 * test `t`: with `t.mock.timers` faking Date, `tick` then moves deadlines and throttles too.
 */
export function monotonicFollowsDate(t: TestContext): void {
  const origin = performance.timeOrigin;
  t.mock.method(performance, "now", () => Date.now() - origin);
}

/**
 * Runs a TypeScript fixture in a child node (`--import tsx`, NODE_OPTIONS cleared, so only
 * `nodeFlags` apply) and resolves its stdout once it exits 0; rejects with the output otherwise.
 * With `timeoutMs` a child still running then is SIGKILLed (a hang that blocks its event loop, deaf
 * to SIGTERM, fails the test instead of blocking it).
 */
export function runFixture(fixture: string, nodeFlags: string[], env: Record<string, string>, timeoutMs?: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...nodeFlags, "--import", "tsx", fixture], {
      env: { ...process.env, ...env, NODE_OPTIONS: "" },
      stdio: ["ignore", "pipe", "inherit"],
      ...(timeoutMs === undefined ? {} : { timeout: timeoutMs, killSignal: "SIGKILL" as const }),
    });
    let out = "";
    child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
    child.once("error", reject);
    child.once("exit", (code, signal) =>
      code === 0 ? resolve(out) : reject(new Error(`${path.basename(fixture)} exited ${code ?? signal}: ${out}`)),
    );
  });
}

/** Delay levels of 100 ms steps (level n waits n × 100 ms): a retry (level 3) comes back after 300 ms. */
export const SHORT_DELAY_LEVELS = Array.from({ length: 18 }, (_, i) => `${(i + 1) * 100}ms`).join(" ");

/** What `start()` was refused with; fails the test when it started (closing what it started). */
export async function refusal(start: () => Promise<unknown>): Promise<unknown> {
  let started: unknown;
  try {
    started = await start();
  } catch (e) {
    return e;
  }
  await (started as { close?: () => Promise<void> } | undefined)?.close?.();
  return assert.fail("it started: it was not refused");
}
