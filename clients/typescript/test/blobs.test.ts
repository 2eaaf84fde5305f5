// Files against a real `deltasnap serve`: attached offline, uploaded before the write that
// references them, downloaded by another replica and checked against their hash, refused when
// tampered with, and read offline from a format 2.0 snapshot.

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile, writeFile } from "node:fs/promises";
import { MemoryStorage, Replica, ReplicaError, type BlobReference } from "../src/index.js";
import { run, scratch, serve } from "./support.js";

const secret = "owner-secret-123";
const clientKey = "client-key-123";

test("a file attached offline is uploaded before its record, read back by another replica, and refused when tampered with", { timeout: 60_000 }, async () => {
  const dir = await scratch("blobs");
  const db = `${dir}/server.sqlite`;
  await writeFile(`${dir}/notes.json`, JSON.stringify([{ id: "n0", text: "first" }]));
  run(["import", "--db", db, "--collection", "notes", `${dir}/notes.json`]);
  run(["bake", "--db", db, "--collection", "notes", "--out", `${dir}/notes.snapshot`]);
  const snapshot = new Uint8Array(await readFile(`${dir}/notes.snapshot`));
  const server = await serve(["--db", db, "--client-writable", "notes"], { DELTASNAP_WRITE_TOKEN: secret, DELTASNAP_CLIENT_KEY: clientKey });
  try {
    const writer = await Replica.open({ name: "writer", snapshot, serverURL: `${server.url}/api`, storage: new MemoryStorage(), clientKey });
    const bytes = new TextEncoder().encode("a photo's bytes, offline");
    const photo = await writer.attach(bytes, "image/jpeg");
    assert.match(photo.$blob, /^[0-9a-f]{64}$/);
    assert.deepEqual(photo, { $blob: photo.$blob, size: bytes.length, type: "image/jpeg" });
    assert.deepEqual(await writer.blob(photo), bytes, "the local copy, before any sync");
    await writer.put("notes", { id: "n1", text: "with a photo", photo });
    const report = await writer.sync();
    assert.equal(report.pushed.applied, 1, JSON.stringify(report));
    const held = await fetch(`${server.url}/blobs/${photo.$blob}`, { headers: { Authorization: `Bearer ${secret}` } });
    assert.equal(held.status, 200);
    assert.deepEqual(new Uint8Array(await held.arrayBuffer()), bytes);

    const reader = await Replica.open({ name: "reader", snapshot, serverURL: `${server.url}/api`, storage: new MemoryStorage() });
    await reader.sync();
    const note = await reader.get("notes", "n1");
    assert.deepEqual(await reader.blob(note!["photo"] as BlobReference), bytes, "downloaded, checked, kept");

    let tampering = true;
    const tamper: typeof fetch = async (input, init) => {
      const answer = await fetch(input, init);
      if (!tampering || !String(input).includes("/blobs/")) return answer;
      const changed = new Uint8Array(await answer.arrayBuffer());
      changed[0] = changed[0]! ^ 1;
      return new Response(changed, { status: 200, headers: answer.headers });
    };
    const storage = new MemoryStorage();
    const victim = await Replica.open({ name: "victim", snapshot, serverURL: `${server.url}/api`, storage, fetch: tamper });
    await victim.sync();
    await assert.rejects(victim.blob(photo), (error: unknown) => error instanceof ReplicaError && error.kind === "unusableAnswer");
    assert.deepEqual(await storage.blobNames(), [], "nothing kept from the tampered download");
    tampering = false;
    assert.deepEqual(await victim.blob(photo), bytes);
    await assert.rejects(victim.blob({ $blob: "0".repeat(64), size: 1, type: "text/plain" }), (error: unknown) => error instanceof ReplicaError && error.kind === "refused");

    // A format 2.0 snapshot carries the file: read offline.
    run(["bake", "--db", db, "--collection", "notes", "--blobs", "--out", `${dir}/with-blobs.snapshot`]);
    const offline = await Replica.open({
      name: "offline",
      snapshot: new Uint8Array(await readFile(`${dir}/with-blobs.snapshot`)),
      serverURL: "http://127.0.0.1:9/api",
      storage: new MemoryStorage(),
    });
    assert.deepEqual(await offline.blob((await offline.get("notes", "n1"))!["photo"] as BlobReference), bytes, "from the snapshot, without a network");
    await assert.rejects(writer.attach(bytes, "not a type"), (error: unknown) => error instanceof ReplicaError && error.kind === "configuration");
  } finally {
    await server.stop();
  }
});
