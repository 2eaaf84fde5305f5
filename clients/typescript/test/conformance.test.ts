// Every vector of docs/conformance/ (its README says what each file asks of an implementation).

import { test } from "node:test";
import assert from "node:assert/strict";
import { applyAnswer, FailedAnswer, verdict, type Fetched, type Validators } from "../src/answer.js";
import { StateDigest } from "../src/digest.js";
import { fromUTF8, parseRecord, wireText } from "../src/json.js";
import { readSnapshot } from "../src/snapshot.js";
import { repositoryFile, repositoryText } from "./support.js";

interface VectorFile<T> {
  cases: T[];
}

async function vectors<T>(name: string): Promise<T[]> {
  return (JSON.parse(await repositoryText(`docs/conformance/${name}`)) as VectorFile<T>).cases;
}

function bytesOfHex(hex: string): Uint8Array {
  return Uint8Array.from(hex.match(/../g) ?? [], (pair) => parseInt(pair, 16));
}

test("canonical-json.json: every input reads to exactly its canonical bytes, or is refused", async () => {
  const cases = await vectors<{ name: string; input?: string; inputHex?: string; canonical?: string; refused?: string }>("canonical-json.json");
  assert.ok(cases.length > 50);
  for (const vector of cases) {
    const read = () => wireText(parseRecord(fromUTF8(vector.inputHex !== undefined ? bytesOfHex(vector.inputHex) : new TextEncoder().encode(vector.input!), "vector")));
    if (vector.refused !== undefined) {
      assert.throws(read, undefined, `${vector.name}: should be refused (${vector.refused})`);
    } else {
      let got: string;
      try {
        got = read();
      } catch (error) {
        assert.fail(`${vector.name}: refused (${(error as Error).message}), expected ${vector.canonical}`);
      }
      assert.equal(got, vector.canonical, vector.name);
    }
  }
});

test("state-digests.json: each digest from its records", async () => {
  const cases = await vectors<{ name: string; records: string[]; digest: string }>("state-digests.json");
  for (const vector of cases) {
    const visible = vector.records.map(parseRecord).filter((record) => !record.hidden);
    assert.equal(StateDigest.of(visible.map((record) => record.body)).hex, vector.digest, vector.name);
  }
});

test("snapshots.json: the files whose verdict is ok are read with their counts; every damaged one is refused", async () => {
  const cases = await vectors<{ file: string; verdict: string; what: string }>("snapshots.json");
  assert.ok(cases.length >= 20);
  for (const vector of cases) {
    const bytes = await repositoryFile(`docs/conformance/${vector.file}`);
    const ok = /^ok: ([0-9]+) records?(?:, ([0-9]+) blobs?)?/.exec(vector.verdict);
    if (ok) {
      const snapshot = await readSnapshot(bytes);
      const records = [...snapshot.records.values()].reduce((sum, list) => sum + list.length, 0);
      assert.equal(records, Number(ok[1]), `${vector.file}: ${vector.what}`);
      if (ok[2] !== undefined) assert.equal(snapshot.blobs.length, Number(ok[2]), `${vector.file}: blobs`);
    } else {
      await assert.rejects(readSnapshot(bytes), undefined, `${vector.file} (${vector.what}) should be refused: ${vector.verdict}`);
    }
  }
});

interface SequenceCase {
  note: string;
  request: { headers: Record<string, string>; method: string; path: string };
  response: { status: number; headers: Record<string, string>; body: string };
  after: { digest: string; etag: string; lastModified: string; records: string[] };
}

test("delta-sequence.json: after each answer the replica holds exactly `after`, resetting to the snapshot where the protocol says", async () => {
  const snapshot = await readSnapshot(await repositoryFile("docs/conformance/delta-sequence.snapshot"));
  const entry = snapshot.manifest.collections[0]!;
  const pristine = () => {
    const records = new Map<string, string>();
    for (const record of snapshot.records.get(entry.name)!) records.set(record.id, record.body);
    return { etag: entry.etag, lastModified: entry.lastModified, records, digest: StateDigest.of(records.values()) };
  };
  let state = pristine();
  const cases = await vectors<SequenceCase>("delta-sequence.json");
  assert.ok(cases.length >= 15);
  for (const [index, vector] of cases.entries()) {
    const headers = new Map(Object.entries(vector.response.headers).map(([name, value]) => [name.toLowerCase(), value]));
    const fetched: Fetched = { status: vector.response.status, header: (name) => headers.get(name) ?? null, body: new TextEncoder().encode(vector.response.body) };
    const sentETag = vector.request.headers["if-none-match"];
    const sent: Validators | undefined = sentETag === undefined ? undefined : { etag: sentETag, lastModified: vector.request.headers["if-modified-since"] ?? "" };
    const result = verdict(fetched, sent);
    let reset = result.kind === "reset";
    if (result.kind === "notModified") {
      if (result.digest.value !== state.digest.value) reset = true;
      else state = { ...state, etag: result.etag ?? state.etag, lastModified: result.lastModified ?? state.lastModified };
    } else if (result.kind === "apply") {
      try {
        const applied = applyAnswer(state.records, state.digest, result.answer, entry.name);
        state = { etag: result.answer.etag, lastModified: result.answer.lastModified, records: applied.records, digest: applied.digest };
      } catch (error) {
        if (!(error instanceof FailedAnswer)) throw error;
        reset = true;
      }
    }
    if (reset) state = pristine();
    const label = `case ${index + 1}: ${vector.note}`;
    assert.equal(state.etag, vector.after.etag, label);
    assert.equal(state.lastModified, vector.after.lastModified, label);
    assert.equal(state.digest.hex, vector.after.digest, label);
    const records = [...state.records.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, body]) => body);
    assert.deepEqual(records, vector.after.records, label);
  }
});
