// Every vector of docs/conformance/ (its README says what each file asks of an implementation),
// as checks that run in Node (conformance.test.ts) and in Chromium (browser-suite.ts) alike.

import { applyAnswer, FailedAnswer, verdict, type Fetched, type Validators } from "../src/answer.js";
import { StateDigest } from "../src/digest.js";
import { fromUTF8, parseRecord, wireText } from "../src/json.js";
import { readSnapshot } from "../src/snapshot.js";
import { check, fail, refused, same } from "./check.js";

/** Reads a file of the repository: from the disk in Node, over HTTP in a browser. */
export interface Files {
  bytes(path: string): Promise<Uint8Array>;
  text(path: string): Promise<string>;
}

async function vectors<T>(files: Files, name: string): Promise<T[]> {
  return (JSON.parse(await files.text(`docs/conformance/${name}`)) as { cases: T[] }).cases;
}

function bytesOfHex(hex: string): Uint8Array {
  return Uint8Array.from(hex.match(/../g) ?? [], (pair) => parseInt(pair, 16));
}

/** canonical-json.json: every input reads to exactly its canonical bytes, or is refused. */
export async function canonicalJSON(files: Files): Promise<number> {
  const cases = await vectors<{ name: string; input?: string; inputHex?: string; canonical?: string; refused?: string }>(files, "canonical-json.json");
  check(cases.length > 50, "canonical-json.json has its cases");
  for (const vector of cases) {
    const read = () => wireText(parseRecord(fromUTF8(vector.inputHex !== undefined ? bytesOfHex(vector.inputHex) : new TextEncoder().encode(vector.input!), "vector")));
    if (vector.refused !== undefined) {
      await refused(read, `${vector.name}: should be refused (${vector.refused})`);
    } else {
      let got: string;
      try {
        got = read();
      } catch (error) {
        fail(`${vector.name}: refused (${(error as Error).message}), expected ${vector.canonical}`);
      }
      same(got, vector.canonical, vector.name);
    }
  }
  return cases.length;
}

/** state-digests.json: each digest from its records. */
export async function stateDigests(files: Files): Promise<number> {
  const cases = await vectors<{ name: string; records: string[]; digest: string }>(files, "state-digests.json");
  for (const vector of cases) {
    const visible = vector.records.map(parseRecord).filter((record) => !record.hidden);
    same(StateDigest.of(visible.map((record) => record.body)).hex, vector.digest, vector.name);
  }
  return cases.length;
}

/** snapshots.json: the files whose verdict is ok are read with their counts; every damaged one is refused. */
export async function snapshots(files: Files): Promise<number> {
  const cases = await vectors<{ file: string; verdict: string; what: string }>(files, "snapshots.json");
  check(cases.length >= 20, "snapshots.json has its cases");
  for (const vector of cases) {
    const bytes = await files.bytes(`docs/conformance/${vector.file}`);
    const ok = /^ok: ([0-9]+) records?(?:, ([0-9]+) blobs?)?/.exec(vector.verdict);
    if (ok) {
      const snapshot = await readSnapshot(bytes);
      const records = [...snapshot.records.values()].reduce((sum, list) => sum + list.length, 0);
      same(records, Number(ok[1]), `${vector.file}: ${vector.what}`);
      if (ok[2] !== undefined) same(snapshot.blobs.length, Number(ok[2]), `${vector.file}: blobs`);
    } else {
      await refused(() => readSnapshot(bytes), `${vector.file} (${vector.what}) should be refused: ${vector.verdict}`);
    }
  }
  return cases.length;
}

interface SequenceCase {
  note: string;
  request: { headers: Record<string, string>; method: string; path: string };
  response: { status: number; headers: Record<string, string>; body: string };
  after: { digest: string; etag: string; lastModified: string; records: string[] };
}

/** delta-sequence.json: after each answer the replica holds exactly `after`, resetting to the snapshot where the protocol says. */
export async function deltaSequence(files: Files): Promise<number> {
  const snapshot = await readSnapshot(await files.bytes("docs/conformance/delta-sequence.snapshot"));
  const entry = snapshot.manifest.collections[0]!;
  const pristine = () => {
    const records = new Map<string, string>();
    for (const record of snapshot.records.get(entry.name)!) records.set(record.id, record.body);
    return { etag: entry.etag, lastModified: entry.lastModified, records, digest: StateDigest.of(records.values()) };
  };
  let state = pristine();
  const cases = await vectors<SequenceCase>(files, "delta-sequence.json");
  check(cases.length >= 15, "delta-sequence.json has its cases");
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
    same(state.etag, vector.after.etag, label);
    same(state.lastModified, vector.after.lastModified, label);
    same(state.digest.hex, vector.after.digest, label);
    const records = [...state.records.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, body]) => body);
    same(records, vector.after.records, label);
  }
  return cases.length;
}

/** A delta computed from another token than the one sent is refused (the vectors never show one). */
export async function deltaFromAnotherBase(): Promise<void> {
  const headers = new Map([
    ["etag", 'W/"1.00000000000000aa.2.00000001"'],
    ["last-modified", "Thu, 01 Jan 1970 00:00:02 GMT"],
    ["delta-digest", "0".repeat(64)],
    ["delta-mode", "delta"],
    ["delta-base", 'W/"1.00000000000000aa.1.00000000"'],
  ]);
  const fetched: Fetched = { status: 200, header: (name) => headers.get(name) ?? null, body: new TextEncoder().encode('{"w":[]}') };
  const result = verdict(fetched, { etag: 'W/"1.00000000000000aa.0.00000000"', lastModified: "Thu, 01 Jan 1970 00:00:00 GMT" });
  check(result.kind === "reset" && result.reason.kind === "integrity", `a delta from another base resets for integrity (got ${JSON.stringify(result)})`);
}

/** Every check, by name. */
export const conformanceChecks: ReadonlyArray<readonly [string, (files: Files) => Promise<unknown>]> = [
  ["canonical-json.json: every input reads to exactly its canonical bytes, or is refused", canonicalJSON],
  ["state-digests.json: each digest from its records", stateDigests],
  ["snapshots.json: ok files read with their counts, every damaged one refused", snapshots],
  ["delta-sequence.json: after each answer, exactly `after`", deltaSequence],
  ["a delta from another base than the one sent resets (integrity)", deltaFromAnotherBase],
];
