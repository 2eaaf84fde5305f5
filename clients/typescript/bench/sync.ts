// One sync of a replica kept in a directory, as a process: what Scripts/bench-typescript times
// beside `deltasnap sync` (the Swift client's command).
//   node dist/bench/sync.js <store directory> <snapshot file> <API URL>

import { readFile } from "node:fs/promises";
import { Replica } from "../src/index.js";
import { DirectoryStorage } from "../src/node.js";

const [store, snapshotPath, serverURL] = process.argv.slice(2) as [string, string, string];
const replica = await Replica.open({ name: store, storage: await DirectoryStorage.open(store), snapshot: await readFile(snapshotPath), serverURL });
const report = await replica.sync();
console.log(report.collections.map((c) => `${c.collection}: ${c.outcome}`).join(", "), await replica.count(replica.collections[0]!));
await replica.close();
