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

  /** Schedules a write of the current state; resolves once a write that includes it is on disk. */
  persist(): Promise<void> {
    this.dirty = true;
    if (!this.writing) {
      this.writing = (async () => {
        try {
          while (this.dirty) {
            this.dirty = false;
            await JsonFile.write(this.path, this.snapshot());
          }
        } finally {
          this.writing = null;
        }
      })();
    }
    return this.writing;
  }

  /** Waits for pending writes. */
  async flush(): Promise<void> {
    while (this.writing) await this.writing;
  }
}
