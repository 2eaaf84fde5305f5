// Users against a real `deltasnap serve --rules`: a user's rows, pushes under their token,
// sign-out back to the bundled snapshot with public data kept, and a user switch.

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile, writeFile } from "node:fs/promises";
import { MemoryStorage, Replica, ReplicaError } from "../src/index.js";
import { run, scratch, serve } from "./support.js";

const jwtSecret = "a-development-secret-of-32-bytes-at-least";
const secret = "owner-secret-123";
const rules = {
  collections: {
    widgets: { read: true },
    members: { read: { user: { eq: { $claim: "sub" } } } },
    posts: {
      read: { team: { in: { $rows: { collection: "members", where: { user: { eq: { $claim: "sub" } } }, member: "team" } } } },
    },
    notes: {
      read: { owner: { eq: { $claim: "sub" } } },
      write: { owner: { eq: { $claim: "sub" } } },
      stamp: { owner: { $claim: "sub" } },
    },
  },
};

function token(sub: string): string {
  return run(["token", "--secret", jwtSecret, "--sub", sub]).trim();
}

for (const cacheable of [false, true]) {
test(`a user's rows, their pushes, sign-out back to the snapshot keeping public data, and a user switch${cacheable ? " (with --cacheable-reads: granted 307s)" : ""}`, { timeout: 90_000 }, async () => {
  const dir = await scratch("users");
  const db = `${dir}/server.sqlite`;
  await writeFile(`${dir}/rules.json`, JSON.stringify(rules));
  await writeFile(`${dir}/widgets.json`, JSON.stringify([{ id: "w1", name: "public" }]));
  await writeFile(`${dir}/notes.json`, JSON.stringify([
    { id: "n-ada", owner: "ada", text: "ada's" },
    { id: "n-bob", owner: "bob", text: "bob's" },
  ]));
  run(["import", "--db", db, "--collection", "widgets", `${dir}/widgets.json`]);
  run(["import", "--db", db, "--collection", "notes", `${dir}/notes.json`]);
  run(["rules", "install", "--db", db, `${dir}/rules.json`]);
  run(["bake", "--db", db, "--collection", "widgets", "--collection", "notes", "--as-claims", '{"sub":"nobody"}', "--out", `${dir}/app.snapshot`]);
  const snapshot = new Uint8Array(await readFile(`${dir}/app.snapshot`));
  const server = await serve(["--db", db, "--rules", `${dir}/rules.json`, "--jwt-secret", jwtSecret, ...(cacheable ? ["--cacheable-reads"] : [])], {
    DELTASNAP_WRITE_TOKEN: secret,
  });
  try {
    let user: string | undefined = "ada";
    const replica = await Replica.open({
      name: "users",
      snapshot,
      serverURL: `${server.url}/api`,
      storage: new MemoryStorage(),
      token: () => (user === undefined ? undefined : token(user)),
    });
    assert.equal(await replica.count("notes"), 0, "the snapshot holds nobody's notes");
    await replica.sync();
    assert.deepEqual((await replica.query("notes")).map((n) => n.id), ["n-ada"], "ada reads her own rows only");

    // A push under ada's token: the server stamps the owner.
    await replica.put("notes", { id: "n-ada-2", text: "written offline", owner: "someone else" });
    const pushed = await replica.sync();
    assert.equal(pushed.pushed.applied, 1);
    assert.equal((await replica.get("notes", "n-ada-2"))!["owner"], "ada", "stamped by the server, as the pull brought it");

    // A public change arrives too, then ada signs out: her rows go, the public delta stays.
    const put = await fetch(`${server.url}/api/widgets/w2`, {
      method: "PUT",
      headers: { Authorization: `Bearer ${secret}`, "Content-Type": "application/json" },
      body: JSON.stringify({ id: "w2", name: "new public" }),
    });
    assert.equal(put.status, 200);
    await replica.sync();
    assert.equal(await replica.count("widgets"), 2);
    const seen: number[] = [];
    const stop = replica.observe("notes", {}, (rows) => seen.push(rows.length));
    await replica.signOut();
    assert.deepEqual(seen, [2, 0], "a live query sees the rows go in one step");
    stop();
    assert.equal(await replica.count("notes"), 0);
    assert.equal(await replica.count("widgets"), 2, "public data is kept");

    // Bob signs in: his rows only.
    user = "bob";
    await replica.sync();
    assert.deepEqual((await replica.query("notes")).map((n) => n.id), ["n-bob"]);

    // Bob writes; before it is pushed, ada's token arrives: the switch is refused, nothing lost.
    await replica.put("notes", { id: "n-bob-2", text: "unsent" });
    user = "ada";
    await assert.rejects(replica.sync(), (error: unknown) => error instanceof ReplicaError && error.kind === "configuration" && /not settled/.test(error.message));
    assert.deepEqual((await replica.query("notes")).map((n) => n.id).sort(), ["n-bob", "n-bob-2"], "bob's rows and write stay until he settles them");
    await assert.rejects(replica.signOut(), /not settled/);
    await replica.signOut({ discardPendingWrites: true });
    await replica.sync({ force: true });
    assert.deepEqual((await replica.query("notes")).map((n) => n.id).sort(), ["n-ada", "n-ada-2"]);
    if (cacheable) {
      const metrics = await (await fetch(`${server.url}/metrics`)).text();
      const redirects = Number(/^deltasnap_cacheable_redirects_total ([0-9]+)/m.exec(metrics)?.[1] ?? 0);
      assert.ok(redirects > 0, `some reads went through a granted 307 (${redirects})`);
    }
    await replica.close();
  } finally {
    await server.stop();
  }
});
}

test("grants and revokes are exact: a membership added brings a team's posts, one hidden takes them away; a denied write is kept, and the collection refused at once after", { timeout: 90_000 }, async () => {
  const dir = await scratch("grants");
  const db = `${dir}/server.sqlite`;
  await writeFile(`${dir}/rules.json`, JSON.stringify(rules));
  await writeFile(`${dir}/widgets.json`, JSON.stringify([{ id: "w1" }]));
  await writeFile(`${dir}/members.json`, JSON.stringify([{ id: "m-ada-red", user: "ada", team: "red" }]));
  await writeFile(`${dir}/posts.json`, JSON.stringify([
    { id: "p-red-1", team: "red", text: "red one" },
    { id: "p-blue-1", team: "blue", text: "blue one" },
    { id: "p-blue-2", team: "blue", text: "blue two" },
  ]));
  await writeFile(`${dir}/notes.json`, JSON.stringify([{ id: "n0", owner: "nobody" }]));
  for (const name of ["widgets", "members", "posts", "notes"]) run(["import", "--db", db, "--collection", name, `${dir}/${name}.json`]);
  run(["rules", "install", "--db", db, `${dir}/rules.json`]);
  run(["bake", "--db", db, "--collection", "widgets", "--collection", "members", "--collection", "posts", "--collection", "notes", "--as-claims", '{"sub":"nobody"}', "--out", `${dir}/app.snapshot`]);
  const server = await serve(["--db", db, "--rules", `${dir}/rules.json`, "--jwt-secret", jwtSecret], { DELTASNAP_WRITE_TOKEN: secret });
  const owner = (method: string, path: string, body?: object) =>
    fetch(`${server.url}/api/${path}`, {
      method,
      headers: { Authorization: `Bearer ${secret}`, "Content-Type": "application/json" },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
  try {
    const replica = await Replica.open({
      name: "grants",
      snapshot: new Uint8Array(await readFile(`${dir}/app.snapshot`)),
      serverURL: `${server.url}/api`,
      storage: new MemoryStorage(),
      token: () => token("ada"),
    });
    await replica.sync();
    assert.deepEqual((await replica.query("posts")).map((p) => p.id), ["p-red-1"]);
    assert.equal((await owner("PUT", "members/m-ada-blue", { id: "m-ada-blue", user: "ada", team: "blue" })).status, 200);
    await replica.sync();
    assert.deepEqual((await replica.query("posts")).map((p) => p.id), ["p-blue-1", "p-blue-2", "p-red-1"], "the grant brings the blue posts");
    assert.equal((await owner("DELETE", "members/m-ada-red")).status, 200);
    await replica.sync();
    assert.deepEqual((await replica.query("posts")).map((p) => p.id), ["p-blue-1", "p-blue-2"], "the revoke takes the red ones away");

    // The rules give users no writes to widgets: denied, kept, and the collection refused at once after.
    await replica.put("widgets", { id: "w2" });
    const report = await replica.sync();
    assert.deepEqual(report.pushed.conflicts.map((c) => [c.id, c.reason]), [["w2", "denied: collection"]]);
    assert.deepEqual((await replica.conflicts()).map((c) => c.reason), ["denied: collection"]);
    await assert.rejects(replica.put("widgets", { id: "w3" }), (error: unknown) => error instanceof ReplicaError && error.kind === "refused");
    await replica.resolve("widgets", "w2", "server");
    assert.equal(await replica.get("widgets", "w2"), undefined, "discarded");
    await replica.close();
  } finally {
    await server.stop();
  }
});
