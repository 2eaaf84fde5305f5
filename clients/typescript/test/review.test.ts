// Defects a reviewing attack found, each held down by a test: a write made during a sync, a
// record 64 levels deep, ids and strings no UTF-8 can carry, a refused file, two openers of one
// store, an app callback that throws, bytes after a snapshot's gzip member.

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile, writeFile } from "node:fs/promises";
import { MemoryStorage, Replica, ReplicaError } from "../src/index.js";
import { DirectoryStorage } from "../src/node.js";
import { readSnapshot } from "../src/snapshot.js";
import { repositoryFile, run, scratch, serve } from "./support.js";

const secret = "owner-secret-123";
const clientKey = "client-key-123";

async function world(name: string, serveArgs: string[] = []) {
  const dir = await scratch(name);
  const db = `${dir}/server.sqlite`;
  await writeFile(`${dir}/w.json`, JSON.stringify([{ id: "a", n: 1 }, { id: "b", n: 2 }]));
  run(["import", "--db", db, "--collection", "w", `${dir}/w.json`]);
  run(["bake", "--db", db, "--collection", "w", "--out", `${dir}/w.snapshot`]);
  const server = await serve(["--db", db, "--client-writable", "w", ...serveArgs], { DELTASNAP_WRITE_TOKEN: secret, DELTASNAP_CLIENT_KEY: clientKey });
  return { dir, snapshot: new Uint8Array(await readFile(`${dir}/w.snapshot`)), server, api: `${server.url}/api` };
}

/** Memory storage whose writes take a while, so that app writes land in the middle of a sync. */
class SlowStorage extends MemoryStorage {
  override async write(group: ReadonlyMap<string, unknown>): Promise<void> {
    await new Promise((resolve) => setTimeout(resolve, 30));
    await super.write(group);
  }
}

test("a write made while a sync applies a pull that confirms earlier writes is kept and pushed", { timeout: 60_000 }, async () => {
  const { snapshot, server, api } = await world("race");
  try {
    let pulls = 0;
    let during: Promise<unknown> | undefined;
    const replica: Replica = await Replica.open({
      name: "race",
      snapshot,
      serverURL: api,
      clientKey,
      storage: new SlowStorage(),
      fetch: async (input, init) => {
        const answer = await fetch(input, init);
        // While the confirming pull's answer is on its way, the app writes.
        // Two writes, so that the second waits for the first's storage write while the pull goes on.
        if (String(input).includes("/api/w") && new Headers(init?.headers).has("Delta-Client") && pulls++ === 0) {
          during = Promise.all([replica.put("w", { id: "during-1", n: 3 }), replica.put("w", { id: "during", n: 4 })]);
        }
        return answer;
      },
    });
    await replica.put("w", { id: "first", n: 1 });
    await replica.sync();
    await during;
    assert.ok(await replica.get("w", "during"), "the write made during the sync is shown");
    assert.ok(await replica.get("w", "during-1"));
    assert.equal(replica.status.pending, 2);
    await replica.sync();
    const held = ((await (await fetch(`${api}/w`)).json()) as { w: Array<{ id: string }> }).w.map((r) => r.id);
    assert.ok(held.includes("during"), `the server got it (${held})`);
  } finally {
    await server.stop();
  }
});

test("a record nested 64 levels deep, which the server accepts, is applied (the body's containers do not count)", { timeout: 60_000 }, async () => {
  const { snapshot, server, api } = await world("deep");
  try {
    let deep: unknown = 1;
    for (let level = 0; level < 63; level++) deep = [deep];
    const put = await fetch(`${api}/w/deep`, { method: "PUT", headers: { Authorization: `Bearer ${secret}`, "Content-Type": "application/json" }, body: JSON.stringify({ id: "deep", v: deep }) });
    assert.equal(put.status, 200, await put.text());
    const replica = await Replica.open({ name: "deep", snapshot, serverURL: api, storage: new MemoryStorage() });
    const report = await replica.sync();
    assert.deepEqual(report.collections.map((c) => c.outcome), ["updated"]);
    assert.ok(await replica.get("w", "deep"));
  } finally {
    await server.stop();
  }
});

test("ids and strings no UTF-8 can carry, non-plain objects, and bad ids on delete are refused at once; nothing is queued", { timeout: 30_000 }, async () => {
  const snapshot = await repositoryFile("docs/conformance/delta-sequence.snapshot");
  const replica = await Replica.open({ name: "refusals", snapshot, serverURL: "http://127.0.0.1:9/api", storage: new MemoryStorage() });
  const invalid = (error: unknown) => error instanceof ReplicaError && error.kind === "invalidRecord";
  await assert.rejects(replica.put("items", { id: "x\ud800" }), invalid);
  await assert.rejects(replica.put("items", { id: "ok", ["k\udc00"]: 1 }), invalid);
  await assert.rejects(replica.put("items", { id: "ok", when: new Date(0) }), invalid);
  await assert.rejects(replica.delete("items", ""), invalid);
  await assert.rejects(replica.delete("items", "x".repeat(513)), invalid);
  await assert.rejects(replica.delete("items", "a\u0000b"), invalid);
  assert.equal(replica.status.pending, 0);
  // A member named __proto__ stays a member, and goes back as one.
  await replica.put("items", JSON.parse('{"id":"p","__proto__":{"role":"admin"}}'));
  const read = (await replica.get("items", "p"))!;
  assert.deepEqual(Object.keys(read).sort(), ["__proto__", "id"]);
  assert.equal((read as { role?: unknown }).role, undefined);
});

test("a file the server refuses for good does not hold back the writes behind it", { timeout: 60_000 }, async () => {
  const { snapshot, server, api } = await world("refused-file", ["--max-blob-size", "1000"]);
  try {
    const replica = await Replica.open({ name: "refused-file", snapshot, serverURL: api, clientKey, storage: new MemoryStorage() });
    const photo = await replica.attach(new Uint8Array(5_000), "image/png");
    await replica.put("w", { id: "with-photo", photo });
    await replica.put("w", { id: "unrelated", n: 9 });
    const report = await replica.sync();
    assert.equal(report.pushError?.kind, "refused");
    const held = ((await (await fetch(`${api}/w`)).json()) as { w: Array<{ id: string }> }).w.map((r) => r.id);
    assert.ok(held.includes("unrelated") && !held.includes("with-photo"), `${held}`);
    const conflicts = await replica.conflicts();
    assert.deepEqual(conflicts.map((c) => [c.id, c.reason.startsWith("invalid: blob-missing")]), [["with-photo", true]]);
  } finally {
    await server.stop();
  }
});

test("one store, one opener: a second open of a directory in use is refused; a lock left by a dead process is taken over", { timeout: 30_000 }, async () => {
  const dir = await scratch("lock");
  const first = await DirectoryStorage.open(dir);
  await assert.rejects(DirectoryStorage.open(dir).then((second) => second.close()), (error: unknown) => error instanceof ReplicaError && /open in another process|open/.test(error.message));
  await first.close();
  await writeFile(`${dir}/lock`, "999999");
  const again = await DirectoryStorage.open(dir);
  await again.close();
});

test("an app callback that throws is reported as the app's error; the write it observed still succeeds", { timeout: 30_000 }, async () => {
  const snapshot = await repositoryFile("docs/conformance/delta-sequence.snapshot");
  const replica = await Replica.open({ name: "thrower", snapshot, serverURL: "http://127.0.0.1:9/api", storage: new MemoryStorage() });
  const reported: unknown[] = [];
  const global = globalThis as { reportError?: (error: unknown) => void };
  const previous = global.reportError;
  global.reportError = (error) => reported.push(error);
  try {
    let calls = 0;
    replica.observe("items", {}, () => {
      calls += 1;
      if (calls > 1) throw new Error("the app's bug");
    });
    await replica.put("items", { id: "z" });
    assert.ok(await replica.get("items", "z"));
    assert.equal(reported.length, 1);
    assert.equal((reported[0] as Error).message, "the app's bug");
  } finally {
    global.reportError = previous;
  }
});

test("a snapshot with bytes after its gzip member, or split into two members, is refused", async () => {
  const valid = await repositoryFile("docs/conformance/snapshots/valid.snapshot");
  await readSnapshot(valid);
  const padded = new Uint8Array(valid.length + 8);
  padded.set(valid);
  await assert.rejects(readSnapshot(padded), /bytes follow the gzip member/);
  const doubled = new Uint8Array(valid.length * 2);
  doubled.set(valid);
  doubled.set(valid, valid.length);
  await assert.rejects(readSnapshot(doubled));
});

test("a query with limit 0 answers no records (with and without an order)", async () => {
  const snapshot = await repositoryFile("docs/conformance/delta-sequence.snapshot");
  const replica = await Replica.open({ name: "limit-0", snapshot, serverURL: "http://127.0.0.1:9/api", storage: new MemoryStorage() });
  assert.deepEqual(await replica.query("items", { limit: 0 }), []);
  assert.deepEqual(await replica.query("items", { limit: 0, order: ["n"] }), []);
  assert.equal((await replica.query("items", { limit: 1, order: [{ member: "n", descending: true }] })).length, 1);
});
