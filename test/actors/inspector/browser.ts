/** Test support: Debian's Chromium driven by playwright-core, with a log of every request. */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { type BrowserContext, chromium, type Page } from "playwright-core";

export const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
export const CHROMIUM_FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-quic",
  "--no-first-run",
  "--disable-component-update",
  "--disable-sync",
];

export interface TestBrowser {
  context: BrowserContext;
  page: Page;
  /** every URL the page requested */
  requests: string[];
  /** uncaught page errors */
  errors: string[];
  close(): Promise<void>;
}

/** Opens a fresh Chromium profile (temp user-data-dir) with one page. */
export async function openBrowser(): Promise<TestBrowser> {
  const profile = await mkdtemp(path.join(tmpdir(), "actormq-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_FLAGS,
    acceptDownloads: true,
    viewport: { width: 1400, height: 900 },
  });
  const requests: string[] = [];
  const errors: string[] = [];
  context.on("request", (r) => requests.push(r.url()));
  const page = context.pages()[0] ?? (await context.newPage());
  page.on("pageerror", (e) => errors.push(e.message));
  return {
    context,
    page,
    requests,
    errors,
    close: async () => {
      await context.close();
      await rm(profile, { recursive: true, force: true });
    },
  };
}

/** The requests that went anywhere but the loopback inspector (data:/blob: URLs are local). */
export function foreignRequests(requests: string[]): string[] {
  return requests.filter((u) => !/^(data:|blob:)/.test(u) && !/^http:\/\/127\.0\.0\.1:\d+\//.test(u));
}
