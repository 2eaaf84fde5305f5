// Scripts/bench-typescript's live-query measurement in Node, on the directory store (fsync per write) and in memory.
//   node dist/bench/live-node.js <snapshot file> <scratch directory> <writes>

import { readFile } from "node:fs/promises";
import { DirectoryStorage } from "../src/node.js";
import { liveQuery } from "./live.js";

const [snapshotPath, directory, writes] = process.argv.slice(2) as [string, string, string];
const snapshot = await readFile(snapshotPath);
const memory = await liveQuery(snapshot, undefined, "memory", Number(writes));
const disk = await liveQuery(snapshot, await DirectoryStorage.open(directory), directory, Number(writes));
console.log(JSON.stringify({ memory, directory: disk }));
