#!/usr/bin/env node
// The package's command: loads the TypeScript sources through tsx and runs bin/actormq.ts.
import { register } from "tsx/esm/api";

register();
await import("./actormq.ts");
