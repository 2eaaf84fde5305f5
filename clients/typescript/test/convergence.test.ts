// Convergence: random writers (the owner over HTTP, three TypeScript replicas and a Swift replica
// through the deltasnap command line) edit and delete the same records for several rounds; every
// conflict is settled; at the end every replica holds exactly the server's records, and the
// TypeScript replicas' state digests equal the server's Delta-Digest. The seed is printed;
// DELTASNAP_SEED replays it.

import { test } from "node:test";
import assert from "node:assert/strict";
import { seeded } from "./check.js";
import { execFileSync } from "node:child_process";
import { readFile, writeFile } from "node:fs/promises";
import { MemoryStorage, Replica } from "../src/index.js";
import { StateDigest } from "../src/digest.js";
import { parseRecord } from "../src/json.js";
import { deltasnap, run, scratch, serve } from "./support.js";

const secret = "owner-secret-123";
const clientKey = "client-key-123";


test("random writers on TypeScript replicas, a Swift replica and the owner converge to the server, digests included", { timeout: 240_000 }, async () => {
  const seed = Number(process.env["DELTASNAP_SEED"] ?? Math.floor(Math.random() * 1_000_000));
  console.log(`convergence.test: seed ${seed} (DELTASNAP_SEED=${seed} replays it)`);
  const next = seeded(seed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!;
  const dir = await scratch("convergence");
  const db = `${dir}/server.sqlite`;
  const ids = Array.from({ length: 40 }, (_, i) => `r${String(i).padStart(2, "0")}`);
  await writeFile(`${dir}/items.json`, JSON.stringify(ids.slice(0, 20).map((id, n) => ({ id, n, by: "import" }))));
  run(["import", "--db", db, "--collection", "items", `${dir}/items.json`]);
  run(["bake", "--db", db, "--collection", "items", "--out", `${dir}/items.snapshot`]);
  const snapshot = new Uint8Array(await readFile(`${dir}/items.snapshot`));
  const server = await serve(["--db", db, "--client-writable", "items"], { DELTASNAP_WRITE_TOKEN: secret, DELTASNAP_CLIENT_KEY: clientKey });
  const api = `${server.url}/api`;
  const swiftStore = `${dir}/swift.sqlite`;
  const swift = (...args: string[]) => execFileSync(deltasnap(), args, { encoding: "utf8", env: { ...process.env, DELTASNAP_CLIENT_KEY: clientKey } });
  const swiftSync = () => swift("sync", "--store", swiftStore, "--snapshot", `${dir}/items.snapshot`, "--url", api);
  const swiftConflicts = () =>
    swift("conflicts", "--store", swiftStore, "--json")
      .split("\n")
      .filter((line) => line.trim() !== "")
      .map((line) => JSON.parse(line) as { collection: string; id: string });
  try {
    const replicas = await Promise.all(
      ["ts-a", "ts-b", "ts-c"].map((name) => Replica.open({ name, snapshot, serverURL: api, storage: new MemoryStorage(), clientKey, initialBackoff: 0 })),
    );
    swiftSync();
    for (let round = 0; round < 12; round++) {
      for (let op = 0; op < 6; op++) {
        const id = pick(ids);
        const n = Math.floor(next() * 1000);
        const writer = Math.floor(next() * 5);
        const deleting = next() < 0.2;
        if (writer < 3) {
          const replica = replicas[writer]!;
          if (deleting && (await replica.get("items", id))) await replica.delete("items", id);
          else await replica.put("items", { id, n, by: `ts-${writer}`, round });
        } else if (writer === 3) {
          if (deleting) {
            execFileSync(deltasnap(), ["delete", "--store", swiftStore, "--collection", "items", id], { encoding: "utf8" });
          } else {
            execFileSync(deltasnap(), ["put", "--store", swiftStore, "--collection", "items"], { encoding: "utf8", input: JSON.stringify({ id, n, by: "swift", round }) } as never);
          }
        } else {
          const answer = deleting
            ? await fetch(`${api}/items/${id}`, { method: "DELETE", headers: { Authorization: `Bearer ${secret}` } })
            : await fetch(`${api}/items/${id}`, {
                method: "PUT",
                headers: { Authorization: `Bearer ${secret}`, "Content-Type": "application/json" },
                body: JSON.stringify({ id, n, by: "owner", round }),
              });
          assert.ok(answer.status === 200 || answer.status === 404, `owner ${deleting ? "DELETE" : "PUT"} ${id}: ${answer.status}`);
        }
      }
      // Everyone syncs, in a random order; conflicts are settled one way or the other.
      for (const which of [0, 1, 2, 3].sort(() => next() - 0.5)) {
        if (which === 3) {
          swiftSync();
          for (const conflict of swiftConflicts()) swift("resolve", "--store", swiftStore, "--collection", conflict.collection, conflict.id, "--keep", next() < 0.5 ? "server" : "local");
        } else {
          const replica = replicas[which]!;
          await replica.sync({ force: true });
          for (const conflict of await replica.conflicts()) await replica.resolve(conflict.collection, conflict.id, next() < 0.5 ? "server" : "local");
        }
      }
    }
    // Settle: sync everyone until nothing is left to push, then once more to pull the last writes.
    for (let pass = 0; pass < 4; pass++) {
      for (const replica of replicas) {
        await replica.sync({ force: true });
        for (const conflict of await replica.conflicts()) await replica.resolve(conflict.collection, conflict.id, "server");
      }
      swiftSync();
      for (const conflict of swiftConflicts()) swift("resolve", "--store", swiftStore, "--collection", conflict.collection, conflict.id, "--keep", "server");
    }
    for (const replica of replicas) await replica.sync({ force: true });
    swiftSync();

    const answer = await fetch(`${api}/items`);
    const digest = answer.headers.get("delta-digest");
    const serverRecords = ((await answer.json()) as { items: Array<Record<string, unknown>> }).items.map((record) => JSON.stringify(record)).sort();
    for (const [index, replica] of replicas.entries()) {
      const held = (await replica.query("items")).map((record) => JSON.stringify(record)).sort();
      assert.deepEqual(held, serverRecords, `TypeScript replica ${index} (seed ${seed})`);
      assert.equal(replica.status.pending, 0, `TypeScript replica ${index}: nothing pending (seed ${seed})`);
      assert.equal(StateDigest.of(held.map((text) => parseRecord(text).body)).hex, digest, `TypeScript replica ${index}: the server's digest`);
    }
    const swiftHeld = swift("dump", "--store", swiftStore, "--collection", "items").trim().split("\n").filter((line) => line).map((line) => JSON.stringify(JSON.parse(line))).sort();
    assert.deepEqual(swiftHeld, serverRecords, `the Swift replica (seed ${seed})`);
    for (const replica of replicas) await replica.close();
  } finally {
    await server.stop();
  }
});
