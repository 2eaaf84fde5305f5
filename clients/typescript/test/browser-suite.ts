// The browser half of the TypeScript client's tests (driven by test/browser.py in headless
// Chromium): the conformance vectors, and a replica on IndexedDB against a real
// `deltasnap serve` on another origin (so CORS, --allow-origin, is exercised too).

import { Replica, ReplicaError, type RecordObject } from "../src/index.js";
import { IndexedDBStorage } from "../src/indexeddb.js";
import { check, same } from "./check.js";
import { conformanceChecks, type Files } from "./conformance-checks.js";

declare global {
  interface Window {
    __results: Array<{ name: string; ok: boolean; error?: string; ms: number }>;
    __done: boolean;
  }
}

const parameters = new URLSearchParams(location.search);
const api = parameters.get("api")!;
const secret = parameters.get("secret")!;
const clientKey = parameters.get("key")!;
const usersAPI = parameters.get("users")!;
const userTokens: Record<string, string> = { ada: parameters.get("ada")!, bob: parameters.get("bob")! };

const files: Files = {
  async bytes(path) {
    const answer = await fetch(`/${path}`);
    if (!answer.ok) throw new Error(`${path}: ${answer.status}`);
    return new Uint8Array(await answer.arrayBuffer());
  },
  async text(path) {
    const answer = await fetch(`/${path}`);
    if (!answer.ok) throw new Error(`${path}: ${answer.status}`);
    return answer.text();
  },
};

async function ownerPut(record: RecordObject): Promise<void> {
  const answer = await fetch(`${api}/api/widgets/${encodeURIComponent(record.id)}`, {
    method: "PUT",
    headers: { Authorization: `Bearer ${secret}`, "Content-Type": "application/json" },
    body: JSON.stringify(record),
  });
  check(answer.status === 200, `the owner's PUT: ${answer.status} ${await answer.text()}`);
}

async function serverIds(): Promise<string[]> {
  const answer = await fetch(`${api}/api/widgets`);
  return ((await answer.json()) as { widgets: RecordObject[] }).widgets.map((record) => record.id);
}

async function snapshot(): Promise<ArrayBuffer> {
  return (await fetch("/fixture/widgets.snapshot")).arrayBuffer();
}

const scenarios: Array<readonly [string, () => Promise<unknown>]> = [
  ...conformanceChecks.map(([name, run]) => [name, () => run(files)] as const),
  [
    "IndexedDB replica: installs offline, syncs a delta across origins (CORS), 304, and survives a reopen",
    async () => {
      await IndexedDBStorage.destroy("suite-delta");
      let replica = await Replica.open({ name: "suite-delta", snapshot: await snapshot(), serverURL: `${api}/api` });
      const installed = await replica.count("widgets");
      check(installed === 12, `the snapshot's 12 records (got ${installed})`);
      await ownerPut({ id: "w0001", n: 1, color: "from the owner" });
      const report = await replica.sync();
      same(report.collections.map((c) => c.outcome), ["updated"], "the first sync");
      same((await replica.get("widgets", "w0001"))?.["color"], "from the owner", "the delta's record");
      same((await replica.sync()).collections.map((c) => c.outcome), ["notModified"], "the second sync");
      await replica.close();
      replica = await Replica.open({ name: "suite-delta", snapshot: await snapshot(), serverURL: "http://127.0.0.1:9/api" });
      same((await replica.get("widgets", "w0001"))?.["color"], "from the owner", "after a reopen, offline");
      await replica.close();
    },
  ],
  [
    "IndexedDB replica: an offline write shows at once, wakes a live query, pushes across origins and comes back",
    async () => {
      await IndexedDBStorage.destroy("suite-writes");
      const replica = await Replica.open({ name: "suite-writes", snapshot: await snapshot(), serverURL: `${api}/api`, clientKey });
      const seen: string[][] = [];
      const stop = replica.observe("widgets", { filter: { color: { eq: "gift" } } }, (rows) => seen.push(rows.map((r) => r.id)));
      await replica.put("widgets", { id: "browser-1", n: 1, color: "gift" });
      same(seen, [[], ["browser-1"]], "the live query");
      check(replica.status.pending === 1, "one pending write");
      const report = await replica.sync();
      check(report.pushed.applied === 1, `pushed (${JSON.stringify(report.pushed)})`);
      check((await serverIds()).includes("browser-1"), "the server holds the write");
      check(Number(replica.status.pending) === 0, "nothing pending");
      same(seen.length, 2, "the pull that confirmed the write changed nothing the query shows");
      stop();
      await replica.close();
    },
  ],
  [
    "IndexedDB replica: a file attached offline is kept in IndexedDB, uploaded across origins before its record, and read back",
    async () => {
      await IndexedDBStorage.destroy("suite-files");
      const replica = await Replica.open({ name: "suite-files", snapshot: await snapshot(), serverURL: `${api}/api`, clientKey });
      const bytes = new Uint8Array(70_000).map((_, i) => (i * 7) % 251);
      const photo = await replica.attach(bytes, "image/png");
      same(Array.from(await replica.blob(photo)), Array.from(bytes), "the local copy");
      await replica.put("widgets", { id: "with-photo", n: 1, photo });
      const report = await replica.sync();
      check(report.pushed.applied === 1, `pushed (${JSON.stringify(report.pushed)})`);
      const held = await fetch(`${api}/blobs/${photo.$blob}`, { headers: { Authorization: `Bearer ${secret}` } });
      check(held.status === 200, `the server holds the file (${held.status})`);
      same(Array.from(new Uint8Array(await held.arrayBuffer())), Array.from(bytes), "the server's bytes");
      await replica.close();
    },
  ],
  [
    "IndexedDB replica: another database's snapshot gets 409 foreign-database, resets, and downloads the full dataset",
    async () => {
      await IndexedDBStorage.destroy("suite-reset");
      const demo = await (await fetch("/Snapshots/demo.snapshot")).arrayBuffer();
      const replica = await Replica.open({ name: "suite-reset", snapshot: demo, serverURL: `${api}/api` });
      const report = await replica.sync();
      same(report.collections.map((c) => [c.outcome, c.reset]), [["reset", "server-signal:foreign-database"]], "the reset");
      same((await replica.query("widgets")).map((r) => r.id), await serverIds(), "the server's records");
      await replica.close();
    },
  ],
  [
    "IndexedDB replica: a selection installed cut down, then kept equal to the server's selection",
    async () => {
      await IndexedDBStorage.destroy("suite-selection");
      const selection = { filter: { color: { eq: "red" } }, limit: 3 };
      const replica = await Replica.open({ name: "suite-selection", snapshot: await snapshot(), serverURL: `${api}/api`, selections: { widgets: selection } });
      same((await replica.query("widgets")).length, 3, "cut down at install");
      await replica.sync();
      const direct = await fetch(`${api}/api/widgets?filter=${encodeURIComponent(JSON.stringify(selection.filter))}&limit=3`);
      const expected = ((await direct.json()) as { widgets: RecordObject[] }).widgets.map((r) => r.id);
      same((await replica.query("widgets")).map((r) => r.id), expected, "the server's selection");
      await replica.close();
    },
  ],
  [
    "IndexedDB replica: an edit of a record someone else changed is a conflict, kept until resolved, then pushed",
    async () => {
      await IndexedDBStorage.destroy("suite-conflict");
      const replica = await Replica.open({ name: "suite-conflict", snapshot: await snapshot(), serverURL: `${api}/api`, clientKey });
      await ownerPut({ id: "w0005", n: 5, color: "the owner's" });
      await replica.put("widgets", { id: "w0005", n: 5, color: "the page's" });
      const report = await replica.sync();
      same(report.pushed.conflicts.map((c) => [c.id, c.reason]), [["w0005", "changed"]], "the conflict");
      same((await replica.get("widgets", "w0005"))?.["color"], "the page's", "the local version stays shown");
      await replica.resolve("widgets", "w0005", "local");
      await replica.sync();
      const held = (await (await fetch(`${api}/api/widgets/w0005`)).json()) as RecordObject;
      same(held["color"], "the page's", "resolved and pushed");
      await replica.close();
    },
  ],
  [
    "IndexedDB replica, users: a user's rows only, across origins with a token; sign-out back to the snapshot keeping public data; another user's rows",
    async () => {
      await IndexedDBStorage.destroy("suite-users");
      const snapshot = await (await fetch("/fixture/users.snapshot")).arrayBuffer();
      let user = "ada";
      const replica = await Replica.open({ name: "suite-users", snapshot, serverURL: `${usersAPI}/api`, token: () => userTokens[user] });
      await replica.sync();
      same((await replica.query("notes")).map((n) => n.id), ["n-ada"], "ada's rows");
      await replica.put("notes", { id: "n-ada-2", text: "from the page" });
      check((await replica.sync()).pushed.applied === 1, "ada's push");
      same((await replica.get("notes", "n-ada-2"))?.["owner"], "ada", "stamped by the server");
      await replica.signOut();
      same(await replica.count("notes"), 0, "signed out: nobody's rows");
      same(await replica.count("widgets"), 1, "public data kept");
      user = "bob";
      await replica.sync();
      same((await replica.query("notes")).map((n) => n.id), ["n-bob"], "bob's rows");
      await replica.close();
    },
  ],
  [
    "IndexedDB replica: a push whose answer is lost is sent again and applied once; an answer changed on the way resets to a clean one",
    async () => {
      await IndexedDBStorage.destroy("suite-lost");
      let loseNext = false;
      let corruptNext = false;
      const replica = await Replica.open({
        name: "suite-lost",
        snapshot: await snapshot(),
        serverURL: `${api}/api`,
        clientKey,
        fetch: async (input, init) => {
          const answer = await fetch(input, init);
          if (loseNext && String(input).endsWith("/push")) {
            loseNext = false;
            throw new TypeError("the connection closed before the answer");
          }
          if (corruptNext && String(input).includes("/api/widgets") && answer.status === 200) {
            corruptNext = false;
            const text = (await answer.text()).replace("fresh", "FRESH");
            return new Response(text, { status: 200, headers: answer.headers });
          }
          return answer;
        },
      });
      await replica.put("widgets", { id: "lost-once", n: 1 });
      loseNext = true;
      try {
        await replica.sync();
        throw new Error("the lost answer did not fail the sync");
      } catch (error) {
        check(error instanceof ReplicaError && error.kind === "network", `a network failure (${String(error)})`);
      }
      const again = await replica.sync({ force: true });
      check(again.pushed.applied + again.pushed.unchanged === 1, `sent again once (${JSON.stringify(again.pushed)})`);
      check((await serverIds()).filter((id) => id === "lost-once").length === 1, "applied once");
      await ownerPut({ id: "w0002", n: 2, color: "fresh" });
      corruptNext = true;
      const report = await replica.sync();
      same(report.collections.map((c) => c.reset), ["digest-mismatch"], "the changed answer is caught");
      same((await replica.get("widgets", "w0002"))?.["color"], "fresh", "and the clean answer applied");
      await replica.close();
    },
  ],
  [
    "a closed replica refuses, saying so",
    async () => {
      await IndexedDBStorage.destroy("suite-closed");
      const replica = await Replica.open({ name: "suite-closed", snapshot: await snapshot(), serverURL: `${api}/api` });
      await replica.close();
      try {
        await replica.query("widgets");
      } catch (error) {
        check(error instanceof ReplicaError && error.kind === "closed", `closed (${String(error)})`);
        return;
      }
      throw new Error("a closed replica answered a query");
    },
  ],
];

async function main(): Promise<void> {
  window.__results = [];
  const list = document.getElementById("results")!;
  for (const [name, run] of scenarios) {
    const started = performance.now();
    let ok = true;
    let error: string | undefined;
    try {
      await run();
    } catch (caught) {
      ok = false;
      error = caught instanceof Error ? `${caught.message}\n${caught.stack ?? ""}` : String(caught);
    }
    window.__results.push({ name, ok, ms: Math.round(performance.now() - started), ...(error === undefined ? {} : { error }) });
    const item = document.createElement("li");
    item.textContent = `${ok ? "ok" : "FAILED"}: ${name}${error ? ` — ${error}` : ""}`;
    list.append(item);
  }
  window.__done = true;
}

void main();
