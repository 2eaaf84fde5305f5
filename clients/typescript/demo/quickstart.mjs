// The README's example in Node, against Scripts/serve-demo.sh (test/readme.test.ts runs it).
import { readFile } from "node:fs/promises";
import { Replica } from "../dist/src/index.js";
import { DirectoryStorage } from "../dist/src/node.js";

const replica = await Replica.open({
  name: "/tmp/widgets-app",
  storage: await DirectoryStorage.open(process.env.REPLICA_DIR ?? "/tmp/widgets-app"),
  snapshot: await readFile(new URL("../../../Snapshots/demo.snapshot", import.meta.url)),
  serverURL: process.env.DELTASNAP_API ?? "http://127.0.0.1:8080/api",
  clientKey: process.env.DELTASNAP_CLIENT_KEY ?? "demo-key-123",
});
const stop = replica.observe("widgets", { filter: { price: { lt: 10 } }, order: ["price"] },
  (rows) => console.log("under 10:", rows.map((row) => `${row.name} ${row.price}`).join(", ")));
await replica.put("widgets", { id: "w1", name: "Widget 1", color: "blue", price: 8.5, note: "gift" });
const report = await replica.sync();
console.log("pushed", report.pushed.applied, "then", report.collections.map((c) => `${c.collection}: ${c.outcome}`).join(", "));
stop();
await replica.close();
