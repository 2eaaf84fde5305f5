// SIGKILL during large syncs and writes: the directory store is always before or after each
// group, never between. After each kill, the stored records sum to the stored digest, every write
// the process reported committed is there, and a sync from the stored token applies cleanly (no
// reset). Randomized: the seed is printed; DELTASNAP_SEED replays it.

import { test } from "node:test";
import assert from "node:assert/strict";
import { seeded } from "./check.js";
import { spawn } from "node:child_process";
import { readFile, writeFile } from "node:fs/promises";
import { Replica } from "../src/index.js";
import { DirectoryStorage } from "../src/node.js";
import { StateDigest } from "../src/digest.js";
import { run, scratch, serve } from "./support.js";

const secret = "owner-secret-123";
const clientKey = "client-key-123";


test("SIGKILL at random moments of large syncs leaves the directory store before or after, never between", { timeout: 300_000 }, async () => {
  const seed = Number(process.env["DELTASNAP_SEED"] ?? Math.floor(Math.random() * 1_000_000));
  const rounds = Number(process.env["DELTASNAP_KILL_ROUNDS"] ?? 8);
  console.log(`crash.test: seed ${seed} (DELTASNAP_SEED=${seed} replays it), ${rounds} rounds`);
  const next = seeded(seed);
  const dir = await scratch("crash");
  const db = `${dir}/server.sqlite`;
  const size = 20_000;
  const records = Array.from({ length: size }, (_, i) => ({ id: `w${String(i).padStart(6, "0")}`, n: i, text: "x".repeat(40) }));
  await writeFile(`${dir}/widgets.json`, JSON.stringify(records));
  run(["import", "--db", db, "--collection", "widgets", `${dir}/widgets.json`]);
  run(["bake", "--db", db, "--collection", "widgets", "--out", `${dir}/widgets.snapshot`]);
  const server = await serve(["--db", db, "--client-writable", "widgets"], { DELTASNAP_WRITE_TOKEN: secret, DELTASNAP_CLIENT_KEY: clientKey });
  const store = `${dir}/replica`;
  const committed: string[] = [];
  try {
    for (let round = 0; round < rounds; round++) {
      // A large change on the server: a few thousand records edited or hidden in one commit.
      const batch = Array.from({ length: 3_000 }, () => {
        const i = Math.floor(next() * size);
        return { id: `w${String(i).padStart(6, "0")}`, n: round * size + i, text: `round ${round}`, hidden: next() < 0.1 };
      });
      const unique = [...new Map(batch.map((r) => [r.id, r])).values()];
      const answer = await fetch(`${server.url}/api/widgets`, {
        method: "POST",
        headers: { Authorization: `Bearer ${secret}`, "Content-Type": "application/json" },
        body: JSON.stringify(unique),
      });
      assert.equal(answer.status, 200, await answer.text());

      const child = spawn("node", [new URL("./crash-child.js", import.meta.url).pathname, store, `${server.url}/api`, `${dir}/widgets.snapshot`, clientKey]);
      let output = "";
      child.stdout.on("data", (chunk) => (output += chunk.toString()));
      child.stderr.on("data", (chunk) => (output += chunk.toString()));
      const exited = new Promise<void>((resolve) => child.on("exit", () => resolve()));
      await new Promise((resolve) => setTimeout(resolve, 150 + Math.floor(next() * 1_500)));
      child.kill("SIGKILL");
      await exited;
      for (const line of output.split("\n")) if (line.startsWith("put ")) committed.push(line.slice(4));
      assert.ok(!/Error|error:/.test(output.replace(/sync failed: .*/g, "")), `the child failed on its own (round ${round}, seed ${seed}): ${output.slice(-500)}`);

      // Before or after: the stored records sum to the stored digest.
      const storage = await DirectoryStorage.open(store);
      const document = (await storage.read("collection:widgets")) as { digest: string; bodies: string[]; etag: string } | undefined;
      if (document) {
        assert.equal(StateDigest.of(document.bodies).hex, document.digest, `round ${round} (seed ${seed}): records and digest from one group`);
      } else {
        // Killed before the first install committed: nothing at all, as before it began.
        assert.equal(committed.length, 0, `round ${round} (seed ${seed}): writes were reported committed, but no collection is stored`);
      }
      const replica = await Replica.open({ name: store, snapshot: new Uint8Array(await readFile(`${dir}/widgets.snapshot`)), serverURL: `${server.url}/api`, clientKey, storage });
      for (const id of committed) assert.ok(await replica.get("widgets", id), `round ${round} (seed ${seed}): the committed write ${id} is kept`);
      const report = await replica.sync({ force: true });
      assert.notEqual(report.collections[0]!.outcome, "reset", `round ${round} (seed ${seed}): the stored token and records agree, so no reset`);
      await replica.close();
    }
    // Every write reported committed reached the server exactly once.
    const held = new Set(((await (await fetch(`${server.url}/api/widgets`)).json()) as { widgets: Array<{ id: string }> }).widgets.map((r) => r.id));
    for (const id of committed) assert.ok(held.has(id), `${id} reached the server`);
  } finally {
    await server.stop();
  }
});
