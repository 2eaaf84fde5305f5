// The TypeScript replica against a real `deltasnap serve` over loopback: the scenarios the
// Swift client's tests cover, in Node.

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile, writeFile } from "node:fs/promises";
import { MemoryStorage, Replica, ReplicaError, type RecordObject } from "../src/index.js";
import { DirectoryStorage } from "../src/node.js";
import { StateDigest } from "../src/digest.js";
import { run, scratch, serve, type Server } from "./support.js";

const secret = "owner-secret-123";
const clientKey = "client-key-123";

/** A database with `records` in `widgets`, its snapshot, and a server on it. */
async function world(name: string, records: object[], serveArgs: string[] = []): Promise<{ dir: string; db: string; snapshot: Uint8Array; server: Server }> {
  const dir = await scratch(name);
  const db = `${dir}/server.sqlite`;
  await writeFile(`${dir}/widgets.json`, JSON.stringify(records));
  run(["import", "--db", db, "--collection", "widgets", `${dir}/widgets.json`]);
  run(["bake", "--db", db, "--collection", "widgets", "--out", `${dir}/widgets.snapshot`]);
  const snapshot = new Uint8Array(await readFile(`${dir}/widgets.snapshot`));
  const server = await serve(["--db", db, "--client-writable", "widgets", ...serveArgs], { DELTASNAP_WRITE_TOKEN: secret, DELTASNAP_CLIENT_KEY: clientKey });
  return { dir, db, snapshot, server };
}

/** The owner's write, over HTTP. */
async function ownerPut(server: Server, record: { id: string; [member: string]: unknown }): Promise<void> {
  const answer = await fetch(`${server.url}/api/widgets/${encodeURIComponent(record.id)}`, {
    method: "PUT",
    headers: { Authorization: `Bearer ${secret}`, "Content-Type": "application/json" },
    body: JSON.stringify(record),
  });
  assert.equal(answer.status, 200, await answer.text());
}

async function ownerDelete(server: Server, id: string): Promise<void> {
  const answer = await fetch(`${server.url}/api/widgets/${id}`, { method: "DELETE", headers: { Authorization: `Bearer ${secret}` } });
  assert.equal(answer.status, 200);
}

/** The server's visible records, by id. */
async function serverRecords(server: Server): Promise<Map<string, string>> {
  const answer = await fetch(`${server.url}/api/widgets`);
  const body = (await answer.json()) as { widgets: RecordObject[] };
  return new Map(body.widgets.map((record) => [record.id, JSON.stringify(record)]));
}

function widgets(count: number): Array<{ id: string; n: number; color: string }> {
  return Array.from({ length: count }, (_, i) => ({ id: `w${String(i).padStart(4, "0")}`, n: i, color: i % 3 === 0 ? "red" : "blue" }));
}

test("installs the bundled snapshot offline, then syncs a delta, then 304; the digest is the server's", { timeout: 60_000 }, async () => {
  const { snapshot, server } = await world("delta", widgets(20));
  try {
    const offline = await Replica.open({ name: "offline", snapshot, serverURL: "http://127.0.0.1:9/api", storage: new MemoryStorage() });
    assert.equal((await offline.query("widgets")).length, 20, "the snapshot's records, without a network");
    await assert.rejects(offline.sync(), (error: unknown) => error instanceof ReplicaError && error.kind === "network");
    assert.equal(offline.status.phase, "backingOff");
    await assert.rejects(offline.sync(), (error: unknown) => error instanceof ReplicaError && error.kind === "backingOff");

    const replica = await Replica.open({ name: "delta", snapshot, serverURL: `${server.url}/api`, storage: new MemoryStorage() });
    await ownerPut(server, { id: "w0001", n: 100, color: "green" });
    await ownerPut(server, { id: "x-new", n: 7, color: "red" });
    await ownerDelete(server, "w0002");
    const report = await replica.sync();
    assert.deepEqual(report.collections.map((c) => c.outcome), ["updated"]);
    assert.deepEqual(await replica.get("widgets", "w0001"), { id: "w0001", n: 100, color: "green" });
    assert.equal(await replica.get("widgets", "w0002"), undefined);
    assert.equal(await replica.count("widgets"), 20);
    const again = await replica.sync();
    assert.deepEqual(again.collections.map((c) => c.outcome), ["notModified"]);
    const held = await serverRecords(server);
    assert.deepEqual(new Set((await replica.query("widgets")).map((r) => r.id)), new Set(held.keys()));
    await replica.close();
  } finally {
    await server.stop();
  }
});

test("a token from another database resets to the snapshot and then downloads the full dataset", { timeout: 60_000 }, async () => {
  const first = await world("foreign-a", widgets(5));
  const second = await world("foreign-b", widgets(8));
  try {
    // The first database's snapshot against the second database's server: 409 foreign-database.
    const replica = await Replica.open({ name: "foreign", snapshot: first.snapshot, serverURL: `${second.server.url}/api`, storage: new MemoryStorage() });
    const report = await replica.sync();
    assert.equal(report.collections[0]!.outcome, "reset");
    assert.equal(report.collections[0]!.reset, "server-signal:foreign-database");
    assert.equal(await replica.count("widgets"), 8);
    assert.deepEqual((await replica.sync()).collections.map((c) => c.outcome), ["notModified"]);
  } finally {
    await first.server.stop();
    await second.server.stop();
  }
});

test("a selection is installed cut down, downloaded whole once, then kept exact as records move in and out", { timeout: 60_000 }, async () => {
  const { snapshot, server } = await world("selection", widgets(30));
  try {
    const replica = await Replica.open({
      name: "selection",
      snapshot,
      serverURL: `${server.url}/api`,
      storage: new MemoryStorage(),
      selections: { widgets: { filter: { color: { eq: "red" } }, limit: 5 } },
    });
    assert.deepEqual((await replica.query("widgets")).map((r) => r.id), ["w0000", "w0003", "w0006", "w0009", "w0012"]);
    await replica.sync();
    await ownerPut(server, { id: "w0003", n: 3, color: "blue" }); // moves out: w0015 moves in
    await ownerPut(server, { id: "a-first", n: -1, color: "red" }); // comes first: w0015 falls past the limit again
    await replica.sync();
    assert.deepEqual((await replica.query("widgets")).map((r) => r.id), ["a-first", "w0000", "w0006", "w0009", "w0012"]);
    const direct = await fetch(`${server.url}/api/widgets?filter=${encodeURIComponent('{"color":{"eq":"red"}}')}&limit=5`);
    const body = (await direct.json()) as { widgets: RecordObject[] };
    assert.deepEqual((await replica.query("widgets")).map((r) => r.id), body.widgets.map((r) => r.id), "the server's own selection");
  } finally {
    await server.stop();
  }
});

test("offline writes show at once, push exactly once, come back from the server; a conflict is kept until resolved", { timeout: 60_000 }, async () => {
  const { snapshot, server } = await world("writes", widgets(4));
  try {
    const replica = await Replica.open({ name: "writes", snapshot, serverURL: `${server.url}/api`, storage: new MemoryStorage(), clientKey });
    await replica.put("widgets", { id: "mine", n: 1, note: "gift" });
    await replica.delete("widgets", "w0000");
    assert.deepEqual(await replica.get("widgets", "mine"), { id: "mine", n: 1, note: "gift" });
    assert.equal(await replica.get("widgets", "w0000"), undefined);
    assert.equal(replica.status.pending, 2);
    const report = await replica.sync();
    assert.equal(report.pushed.applied, 2);
    assert.equal(replica.status.pending, 0);
    const held = await serverRecords(server);
    assert.ok(held.has("mine") && !held.has("w0000"));

    // Someone else edits w0001; this replica edits it from its older copy: a conflict.
    await ownerPut(server, { id: "w0001", n: 1, color: "purple" });
    await replica.put("widgets", { id: "w0001", n: 1, color: "orange" });
    const conflicted = await replica.sync();
    assert.equal(conflicted.pushed.conflicts.length, 1);
    const [conflict] = await replica.conflicts();
    assert.equal(conflict!.reason, "changed");
    assert.deepEqual(conflict!.server, { id: "w0001", n: 1, color: "purple" });
    assert.deepEqual(conflict!.local, { id: "w0001", n: 1, color: "orange" });
    assert.equal((await replica.get("widgets", "w0001"))!["color"], "orange", "the local version stays shown");
    await replica.resolve("widgets", "w0001", { id: "w0001", n: 1, color: "purple-orange" });
    await replica.sync();
    assert.equal((await replica.conflicts()).length, 0);
    assert.equal(JSON.parse((await serverRecords(server)).get("w0001")!).color, "purple-orange");
    assert.equal(replica.status.pending, 0);
  } finally {
    await server.stop();
  }
});

test("a push whose answer is lost is sent again and applied once", { timeout: 60_000 }, async () => {
  const { db, snapshot, server } = await world("lost", widgets(2));
  try {
    let dropAnswer = true;
    const losing: typeof fetch = async (input, init) => {
      const answer = await fetch(input, init);
      if (String(input).endsWith("/push") && dropAnswer) {
        dropAnswer = false;
        throw new TypeError("the connection closed before the answer");
      }
      return answer;
    };
    const replica = await Replica.open({ name: "lost", snapshot, serverURL: `${server.url}/api`, storage: new MemoryStorage(), clientKey, fetch: losing });
    await replica.put("widgets", { id: "once", n: 1 });
    await assert.rejects(replica.sync(), (error: unknown) => error instanceof ReplicaError && error.kind === "network");
    const report = await replica.sync({ force: true });
    assert.equal(report.pushed.applied + report.pushed.unchanged, 1);
    assert.ok((await serverRecords(server)).has("once"));
    const logged = run(["log", "--db", db, "--collection", "widgets", "--id", "once", "--json"]).trim().split("\n");
    assert.equal(logged.length, 1, `applied exactly once: ${logged.join(" | ")}`);
    assert.equal(JSON.parse(logged[0]!).client, replica.clientID);
  } finally {
    await server.stop();
  }
});

test("live queries answer now, after a local write and after a sync, and stay quiet for changes that do not alter them", { timeout: 60_000 }, async () => {
  const { snapshot, server } = await world("observe", widgets(10));
  try {
    const replica = await Replica.open({ name: "observe", snapshot, serverURL: `${server.url}/api`, storage: new MemoryStorage(), clientKey });
    const seen: string[][] = [];
    const stop = replica.observe("widgets", { filter: { color: { eq: "red" } }, order: [{ member: "n", descending: true }], limit: 2 }, (rows) => {
      seen.push(rows.map((r) => r.id));
    });
    assert.deepEqual(seen, [["w0009", "w0006"]]);
    await replica.put("widgets", { id: "w0001", n: 1, color: "blue", note: "not red: no change to the result" });
    assert.equal(seen.length, 1);
    await replica.put("widgets", { id: "top", n: 99, color: "red" });
    assert.deepEqual(seen[1], ["top", "w0009"]);
    await ownerPut(server, { id: "w0008", n: 1000, color: "red" });
    await replica.sync();
    assert.deepEqual(seen[seen.length - 1], ["w0008", "top"]);
    const count = seen.length;
    await replica.sync();
    assert.equal(seen.length, count, "a 304 changes nothing");
    stop();
    await replica.put("widgets", { id: "after", n: 5000, color: "red" });
    assert.equal(seen.length, count, "a stopped query is not called");
  } finally {
    await server.stop();
  }
});

test("the directory store survives a reopen: data, token, digest and queued writes", { timeout: 60_000 }, async () => {
  const { dir, snapshot, server } = await world("directory", widgets(50));
  try {
    const path = `${dir}/replica`;
    let replica = await Replica.open({ name: path, snapshot, serverURL: `${server.url}/api`, storage: await DirectoryStorage.open(path), clientKey });
    await ownerPut(server, { id: "w0010", n: 10, color: "gold" });
    await replica.sync();
    await replica.put("widgets", { id: "queued", n: 1 });
    await replica.close();
    replica = await Replica.open({ name: path, snapshot, serverURL: `${server.url}/api`, storage: await DirectoryStorage.open(path), clientKey });
    assert.equal((await replica.get("widgets", "w0010"))!["color"], "gold");
    assert.equal(replica.status.pending, 1);
    const report = await replica.sync();
    assert.equal(report.pushed.applied, 1);
    assert.equal(report.collections[0]!.outcome, "updated");
    await replica.close();
  } finally {
    await server.stop();
  }
});

test("a damaged answer (digest mismatch) rolls back and resets; a delta from another base resets too", { timeout: 60_000 }, async () => {
  const { snapshot, server } = await world("damaged", widgets(6));
  try {
    let tamper: ((body: string, headers: Headers) => { body: string; headers: Headers }) | undefined;
    const proxy: typeof fetch = async (input, init) => {
      const answer = await fetch(input, init);
      if (!tamper || !String(input).includes("/api/widgets")) return answer;
      const text = await answer.text();
      const changed = tamper(text, new Headers(answer.headers));
      tamper = undefined;
      return new Response(answer.status === 304 ? null : changed.body, { status: answer.status, headers: changed.headers });
    };
    const replica = await Replica.open({ name: "damaged", snapshot, serverURL: `${server.url}/api`, storage: new MemoryStorage(), fetch: proxy });
    await ownerPut(server, { id: "w0001", n: 1, color: "green" });
    tamper = (body, headers) => ({ body: body.replace("green", "GREEN"), headers });
    const report = await replica.sync();
    assert.equal(report.collections[0]!.reset, "digest-mismatch");
    assert.equal((await replica.get("widgets", "w0001"))!["color"], "green", "after the reset, the clean answer");

    await ownerPut(server, { id: "w0002", n: 2, color: "green" });
    tamper = (body, headers) => {
      headers.set("Delta-Base", 'W/"1.0000000000000000.1.00000000"');
      return { body, headers };
    };
    const other = await replica.sync();
    assert.equal(other.collections[0]!.reset, "integrity");
    const records = await replica.query("widgets");
    const held = await serverRecords(server);
    assert.equal(records.length, held.size);
    assert.equal(StateDigest.of([]).hex.length, 64);
  } finally {
    await server.stop();
  }
});

test("updates() syncs at once, then as soon as a write lands (HEAD ?wait=), and stops with its signal", { timeout: 60_000 }, async () => {
  const { snapshot, server } = await world("updates", widgets(3));
  try {
    const replica = await Replica.open({ name: "updates", snapshot, serverURL: `${server.url}/api`, storage: new MemoryStorage() });
    const stop = new AbortController();
    const reports: string[][] = [];
    let landed = 0;
    const loop = (async () => {
      for await (const report of replica.updates({ wait: 20, signal: stop.signal })) {
        reports.push(report.collections.map((c) => c.outcome));
        if (reports.length === 2) {
          landed = Date.now() - landed;
          stop.abort();
        }
      }
    })();
    while (reports.length < 1) await new Promise((resolve) => setTimeout(resolve, 20));
    await new Promise((resolve) => setTimeout(resolve, 300)); // the HEAD ?wait= is held by now
    landed = Date.now();
    await ownerPut(server, { id: "live", n: 1, color: "red" });
    await loop;
    assert.deepEqual(reports, [["notModified"], ["updated"]], "the first sync finds the snapshot current; the second brings the write");
    assert.ok(landed < 5_000, `the write arrived within seconds, not at the end of the wait (${landed} ms)`);
    assert.equal((await replica.get("widgets", "live"))!["color"], "red");
  } finally {
    await server.stop();
  }
});

test("before the first sync of a selection installed cut down, an edit is based on the snapshot's token: applied, no conflict", { timeout: 60_000 }, async () => {
  const { snapshot, server } = await world("selection-write", widgets(6));
  try {
    const replica = await Replica.open({
      name: "selection-write",
      snapshot,
      serverURL: `${server.url}/api`,
      storage: new MemoryStorage(),
      clientKey,
      selections: { widgets: { filter: { color: { eq: "red" } } } },
    });
    await replica.put("widgets", { id: "w0003", n: 3, color: "red", edited: true });
    await replica.put("widgets", { id: "brand-new", n: 9, color: "red" });
    const report = await replica.sync();
    assert.equal(report.pushed.applied, 2, JSON.stringify(report.pushed));
    assert.deepEqual(report.pushed.conflicts, []);
    assert.equal(JSON.parse((await serverRecords(server)).get("w0003")!).edited, true);
  } finally {
    await server.stop();
  }
});

test("cacheable reads: two replicas at one token follow the 307 to one shared answer, computed once", { timeout: 60_000 }, async () => {
  const { snapshot, server } = await world("cacheable", widgets(10), ["--cacheable-reads"]);
  try {
    const open = (name: string) => Replica.open({ name, snapshot, serverURL: `${server.url}/api`, storage: new MemoryStorage() });
    const first = await open("cacheable-1");
    const second = await open("cacheable-2");
    await ownerPut(server, { id: "w0004", n: 4, color: "cached" });
    await ownerDelete(server, "w0005");
    for (const replica of [first, second]) {
      const report = await replica.sync();
      assert.deepEqual(report.collections.map((c) => c.outcome), ["updated"]);
      assert.equal((await replica.get("widgets", "w0004"))!["color"], "cached");
      assert.equal(await replica.get("widgets", "w0005"), undefined);
    }
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    const value = (name: string) => Number(new RegExp(`^${name.replace(/[{}"=]/g, (c) => `\\${c}`)} ([0-9]+)`, "m").exec(metrics)?.[1] ?? 0);
    assert.equal(value("deltasnap_cacheable_redirects_total"), 2, "both were redirected");
    assert.equal(value('deltasnap_cacheable_answers_total{source="database"}'), 1, "the answer was computed once");
    assert.equal(value('deltasnap_cacheable_answers_total{source="memory"}'), 1, "and sent again from memory");
  } finally {
    await server.stop();
  }
});

test("a newer bundled snapshot (a new app build) is adopted at open; the same one again changes nothing", { timeout: 60_000 }, async () => {
  const { dir, db, snapshot, server } = await world("newer", widgets(5));
  try {
    const storage = new MemoryStorage();
    let replica = await Replica.open({ name: "newer", snapshot, serverURL: `${server.url}/api`, storage });
    await replica.put("widgets", { id: "kept", n: 1 });
    await replica.close();
    await ownerPut(server, { id: "w0001", n: 1, color: "in the new build" });
    run(["bake", "--db", db, "--collection", "widgets", "--out", `${dir}/newer.snapshot`]);
    const newer = new Uint8Array(await readFile(`${dir}/newer.snapshot`));
    replica = await Replica.open({ name: "newer", snapshot: newer, serverURL: "http://127.0.0.1:9/api", storage });
    assert.equal((await replica.get("widgets", "w0001"))!["color"], "in the new build", "offline, from the newer snapshot");
    assert.ok(await replica.get("widgets", "kept"), "the app's pending write survives the new build");
    await replica.close();
    replica = await Replica.open({ name: "newer", snapshot, serverURL: "http://127.0.0.1:9/api", storage });
    assert.equal((await replica.get("widgets", "w0001"))!["color"], "in the new build", "an older bundled snapshot is not taken back");
    await replica.close();
  } finally {
    await server.stop();
  }
});

test("resetting in a loop is guarded: the same failure soon after a reset defers the next one, and the status says what happened", { timeout: 60_000 }, async () => {
  const { snapshot, server } = await world("loop", widgets(4));
  try {
    // A cache on the way that always changes the widgets' answers: every answer fails its digest.
    const broken: typeof fetch = async (input, init) => {
      const answer = await fetch(input, init);
      if (!String(input).includes("/api/widgets") || answer.status !== 200) return answer;
      return new Response((await answer.text()).replace('"n":', '"N":'), { status: 200, headers: answer.headers });
    };
    const replica = await Replica.open({ name: "loop", snapshot, serverURL: `${server.url}/api`, storage: new MemoryStorage(), fetch: broken, initialBackoff: 30 });
    const phases: string[] = [];
    replica.observeStatus((status) => phases.push(status.phase));
    await ownerPut(server, { id: "w0001", n: 100, color: "new" });
    // The first: a reset, whose own answers fail too: the snapshot's data stays, and the sync fails.
    await assert.rejects(replica.sync(), (error: unknown) => error instanceof ReplicaError && error.kind === "unusableAnswer");
    assert.equal(await replica.count("widgets"), 4, "the bundled snapshot's records, not a mixture");
    assert.equal(replica.status.phase, "backingOff");
    assert.ok(replica.status.lastError);
    // Soon after, for the same reason: deferred, the data kept, the sync not failed.
    const report = await replica.sync({ force: true });
    assert.deepEqual(report.collections.map((c) => [c.outcome, c.reset]), [["resetDeferred", "digest-mismatch"]]);
    assert.deepEqual(phases.slice(0, 3), ["idle", "syncing", "backingOff"]);
    assert.equal(replica.status.phase, "idle");
  } finally {
    await server.stop();
  }
});
