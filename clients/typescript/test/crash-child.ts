// A replica process for crash.test.ts: syncs and writes in a loop until it is killed, saying
// on stdout what it knows is committed ("put <id>" once a put resolved).
//   node crash-child.js <directory> <serverURL> <snapshot file> <client key>

import { readFile } from "node:fs/promises";
import { Replica } from "../src/index.js";
import { DirectoryStorage } from "../src/node.js";

const [directory, serverURL, snapshotPath, clientKey] = process.argv.slice(2) as [string, string, string, string];
const replica = await Replica.open({
  name: directory,
  snapshot: new Uint8Array(await readFile(snapshotPath)),
  serverURL,
  clientKey,
  storage: await DirectoryStorage.open(directory),
  initialBackoff: 0,
});
let count = 0;
for (;;) {
  const id = `child-${process.pid}-${count++}`;
  await replica.put("widgets", { id, n: count });
  console.log(`put ${id}`);
  try {
    await replica.sync({ force: true });
    console.log("synced");
  } catch (error) {
    console.log(`sync failed: ${(error as Error).message}`);
  }
}
