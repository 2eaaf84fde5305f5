// Live queries keep their last result and change it in place (a few insertions after a local
// write, a sort again after a large sync): checked against a fresh `query` after every change,
// with random writes, local and the server's, over several queries at once. The seed is printed;
// DELTASNAP_SEED replays it.

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile, writeFile } from "node:fs/promises";
import { MemoryStorage, Replica, type QueryOptions, type RecordObject } from "../src/index.js";
import { seeded } from "./check.js";
import { run, scratch, serve } from "./support.js";

const secret = "owner-secret-123";
const clientKey = "client-key-123";
const colors = ["red", "blue", "green"];

test("a live query's every answer equals a fresh query, and it is called only when that answer changed", { timeout: 120_000 }, async () => {
  const seed = Number(process.env["DELTASNAP_SEED"] ?? Math.floor(Math.random() * 1_000_000));
  console.log(`live.test: seed ${seed} (DELTASNAP_SEED=${seed} replays it)`);
  const next = seeded(seed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!;
  const record = (id: string) => ({ id, n: Math.floor(next() * 50) - 10, color: pick(colors), ...(next() < 0.2 ? {} : { rank: Math.floor(next() * 5) }) });

  const dir = await scratch("live");
  const db = `${dir}/server.sqlite`;
  await writeFile(`${dir}/widgets.json`, JSON.stringify(Array.from({ length: 300 }, (_, i) => record(`w${String(i).padStart(4, "0")}`))));
  run(["import", "--db", db, "--collection", "widgets", `${dir}/widgets.json`]);
  run(["bake", "--db", db, "--collection", "widgets", "--out", `${dir}/widgets.snapshot`]);
  const snapshot = new Uint8Array(await readFile(`${dir}/widgets.snapshot`));
  const server = await serve(["--db", db, "--client-writable", "widgets"], { DELTASNAP_WRITE_TOKEN: secret, DELTASNAP_CLIENT_KEY: clientKey });
  const owner = (method: string, id: string, body?: object) =>
    fetch(`${server.url}/api/widgets/${id}`, {
      method,
      headers: { Authorization: `Bearer ${secret}`, "Content-Type": "application/json" },
      ...(body ? { body: JSON.stringify(body) } : {}),
    }).then(async (answer) => assert.equal(answer.status, 200, await answer.text()));
  try {
    const replica = await Replica.open({ name: "live", snapshot, serverURL: `${server.url}/api`, storage: new MemoryStorage(), clientKey });
    const queries: QueryOptions[] = [
      {},
      { order: ["n"] },
      { order: [{ member: "rank", descending: true }, "n"], limit: 20 },
      { filter: { color: { eq: "red" } }, order: [{ member: "n", descending: true }], limit: 7, offset: 3 },
      { filter: { n: { gte: 10 } }, order: ["color", "rank"] },
      { order: ["n"], limit: 0 },
    ];
    const watched = queries.map((query) => {
      const watch = { query, calls: 0, last: undefined as RecordObject[] | undefined, previous: undefined as RecordObject[] | undefined };
      replica.observe("widgets", query, (records) => {
        watch.calls += 1;
        watch.previous = watch.last;
        watch.last = records;
      });
      return watch;
    });
    const ids = () => Array.from({ length: 340 }, (_, i) => `w${String(i).padStart(4, "0")}`);
    for (let step = 0; step < 60; step++) {
      const callsBefore = watched.map((watch) => watch.calls);
      const answersBefore = await Promise.all(queries.map((query) => replica.query("widgets", query)));
      const roll = next();
      let what: string;
      if (roll < 0.6) {
        // A local write: a few insertions in the kept order.
        const id = pick(ids());
        if (next() < 0.25) await replica.delete("widgets", id).catch(() => undefined);
        else await replica.put("widgets", record(id));
        what = `local write of ${id}`;
      } else {
        // The server's writes, few or many (a sort again), then a sync that also pushes the local ones.
        const count = next() < 0.5 ? 1 + Math.floor(next() * 5) : 70 + Math.floor(next() * 60);
        for (let i = 0; i < count; i++) {
          const id = pick(ids());
          if (next() < 0.2) await fetch(`${server.url}/api/widgets/${id}`, { method: "DELETE", headers: { Authorization: `Bearer ${secret}` } });
          else await owner("PUT", id, record(id));
        }
        await replica.sync();
        what = `${count} server writes and a sync`;
      }
      for (const [index, watch] of watched.entries()) {
        const expected = await replica.query("widgets", watch.query);
        const context = `step ${step} (${what}), query ${index} ${JSON.stringify(watch.query)}, seed ${seed}`;
        assert.deepEqual(watch.last, expected, context);
        const changed = JSON.stringify(expected) !== JSON.stringify(answersBefore[index]);
        assert.equal(watch.calls - callsBefore[index]!, changed ? 1 : 0, `called once when changed, never otherwise: ${context}`);
        // Records are frozen, and a record that did not change is the same object as in the last call.
        for (const item of watch.last!) assert.ok(Object.isFrozen(item), context);
        if (changed && watch.previous) {
          const before = new Map(watch.previous.map((item) => [item.id, item]));
          for (const item of watch.last!) {
            const old = before.get(item.id);
            if (old && JSON.stringify(old) === JSON.stringify(item)) assert.equal(item, old, `the same object for an unchanged record: ${context}`);
          }
        }
      }
    }
    const first = watched[0]!.last![0]!;
    assert.throws(() => {
      (first as Record<string, unknown>)["color"] = "changed";
    }, (error: unknown) => error instanceof TypeError);
    await replica.close();
  } finally {
    await server.stop();
  }
});
