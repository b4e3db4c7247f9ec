/**
 * One broker JSON config file under `<storeDir>/config/` (topics.json, subscriptionGroup.json):
 * loaded once, written atomically (store/jsonFile), writes coalesced so a burst of changes costs
 * one write and the last state always reaches disk.
 */
import path from "node:path";
import { JsonFile } from "../../store/index.ts";

/** Directory under the store root that holds the broker's JSON config. */
export const CONFIG_DIR = "config";

/** A coalescing atomic writer for one config file. */
export class ConfigFile<T extends object> {
  readonly path: string;
  private writing: Promise<void> | null = null;
  private dirty = false;

  constructor(
    storeDir: string,
    fileName: string,
    private readonly snapshot: () => T,
  ) {
    this.path = path.join(storeDir, CONFIG_DIR, fileName);
  }

  /** The stored object, or null when the file does not exist yet. */
  async load(): Promise<unknown> {
    return (await JsonFile.read(this.path)) ?? null;
  }

  /**
   * Schedules a write of the current state; resolves once a write that includes it is on disk.
   * A failed write rejects its callers and leaves the state dirty: the next persist (a later
   * change, or close) writes again.
   */
  persist(): Promise<void> {
    this.dirty = true;
    if (!this.writing) {
      // JsonFile.write is synchronous, so the loop may settle before `writing` is assigned: it is
      // cleared here, once assigned, rather than in the loop (a rejected write must not stay put)
      const w = this.writeLoop();
      this.writing = w;
      const clear = () => {
        if (this.writing === w) this.writing = null;
      };
      w.then(clear, clear);
    }
    return this.writing;
  }

  private async writeLoop(): Promise<void> {
    while (this.dirty) {
      this.dirty = false;
      try {
        JsonFile.write(this.path, this.snapshot());
      } catch (e) {
        this.dirty = true;
        throw e;
      }
      // let changes made meanwhile join the next write instead of each costing one
      await Promise.resolve();
    }
  }

  /** Waits for pending writes; a failed one is not an error here (the next persist retries it). */
  async flush(): Promise<void> {
    while (this.writing) await this.writing.catch(() => {});
  }
}
