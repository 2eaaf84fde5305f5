// What an answer to a collection's read means (docs/PROTOCOL.md, "What a client does with each
// answer"), and applying a 200 to the records a replica holds, checked against its digest.
// Pure functions over values: the replica calls them, and the conformance tests call them with
// the recorded answers of docs/conformance/delta-sequence.json.

import { DigestSum, StateDigest } from "./digest.js";
import { ReplicaError } from "./errors.js";
import { JSONObject, type WireRecord, fromUTF8, parseJSON, recordFrom } from "./json.js";

/** Why a collection resets (docs/PROTOCOL.md, "Resetting in a loop"): `kind` decides the streak. */
export interface ResetReason {
  /** `server-signal:<Delta-Reset>`, `undecodable-body`, `invalid-record`, `integrity` or `digest-mismatch`. */
  readonly kind: string;
  /** What showed it. */
  readonly detail: string;
}

/** The validators a read was sent with; undefined: an unconditional read. */
export interface Validators {
  readonly etag: string;
  readonly lastModified: string;
}

/** An answer as the replica sees it: status, headers (lower-case names), body bytes. */
export interface Fetched {
  readonly status: number;
  header(name: string): string | null;
  readonly body: Uint8Array;
}

/** A 200 to apply. */
export interface Answer {
  readonly mode: "full" | "delta";
  readonly etag: string;
  readonly lastModified: string;
  readonly digest: StateDigest;
  readonly body: Uint8Array;
}

/** What an answer means, before anything is applied. */
export type Verdict =
  | { readonly kind: "notModified"; readonly etag: string | null; readonly lastModified: string | null; readonly digest: StateDigest }
  | { readonly kind: "apply"; readonly answer: Answer }
  | { readonly kind: "reset"; readonly reason: ResetReason };

/** Reads status and headers. Throws `ReplicaError` for failures that are not the answer's
 *  fault (a 5xx or 429: `serverUnavailable`; any other status: `refused`). */
export function verdict(fetched: Fetched, sent: Validators | undefined): Verdict {
  const integrity = (detail: string): Verdict => ({ kind: "reset", reason: { kind: "integrity", detail } });
  const digest = StateDigest.parse(fetched.header("delta-digest"));
  switch (fetched.status) {
    case 304:
      if (!sent) return integrity("304 to a request without validators");
      if (!digest) return integrity("a 304 without a valid Delta-Digest");
      return { kind: "notModified", etag: fetched.header("etag"), lastModified: fetched.header("last-modified"), digest };
    case 409:
      return { kind: "reset", reason: { kind: `server-signal:${fetched.header("delta-reset") ?? "409 without Delta-Reset"}`, detail: excerpt(fetched) } };
    case 200: {
      const etag = fetched.header("etag");
      const lastModified = fetched.header("last-modified");
      if (etag === null || lastModified === null) return integrity("a 200 without ETag and Last-Modified");
      if (!digest) return integrity("a 200 without a valid Delta-Digest");
      const mode = fetched.header("delta-mode");
      if (mode === "full" || (mode === null && !sent)) return { kind: "apply", answer: { mode: "full", etag, lastModified, digest, body: fetched.body } };
      if (mode === "delta") {
        const base = fetched.header("delta-base");
        if (!sent || base !== sent.etag) {
          return integrity(`a delta computed from another token (Delta-Base ${JSON.stringify(base ?? "none")}, sent ${JSON.stringify(sent?.etag ?? "none")})`);
        }
        return { kind: "apply", answer: { mode: "delta", etag, lastModified, digest, body: fetched.body } };
      }
      return integrity(`a 200 with Delta-Mode ${mode === null ? "missing" : JSON.stringify(mode)}`);
    }
    default:
      throwIfUnavailable(fetched, "the server cannot answer now");
      throw new ReplicaError("refused", "the server refused the request", `${fetched.status}: ${excerpt(fetched)}`);
  }
}

/** Throws `serverUnavailable` (with the server's `Retry-After`) for a `429` or a `5xx`: a failure
 *  of the moment, which the sync's back-off retries; `what` says what could not be done. */
export function throwIfUnavailable(fetched: Fetched, what: string): void {
  if (fetched.status === 429 || (fetched.status >= 500 && fetched.status <= 599)) {
    throw new ReplicaError("serverUnavailable", what, `${fetched.status}: ${excerpt(fetched)}`, retryAfter(fetched.header("retry-after")));
  }
}

/** The first 200 characters of a body, for messages. */
export function excerpt(fetched: Fetched): string {
  return new TextDecoder().decode(fetched.body.subarray(0, 200)).trim();
}

/** A `Retry-After` value: seconds or an HTTP date. */
export function retryAfter(value: string | null): Date | undefined {
  if (value === null) return undefined;
  const text = value.trim();
  if (/^[0-9]+$/.test(text)) return new Date(Date.now() + Number(text) * 1000);
  const date = Date.parse(text);
  return Number.isNaN(date) ? undefined : new Date(date);
}

/** Thrown by `applyAnswer` when the answer cannot be used: the collection resets. */
export class FailedAnswer extends Error {
  constructor(readonly reason: ResetReason) {
    super(`${reason.kind}: ${reason.detail}`);
  }
}

/** Reads a 200's body, `{"<collection>":[…]}` (docs/PROTOCOL.md, "The body"), as wire records. */
export function readBody(body: Uint8Array, collection: string): WireRecord[] {
  let text: string;
  try {
    text = fromUTF8(body, "answer");
  } catch (error) {
    throw new FailedAnswer({ kind: "undecodable-body", detail: (error as Error).message });
  }
  const prefix = /^[ \t\n\r]*\{"([A-Za-z0-9_-]{1,64})":/.exec(text);
  if (!prefix || prefix[1] !== collection) throw new FailedAnswer({ kind: "undecodable-body", detail: `not {"${collection}":[…]}` });
  let value;
  try {
    // The body's two containers do not count against a record's 64 levels.
    value = parseJSON(text, -1);
  } catch (error) {
    throw new FailedAnswer({ kind: "undecodable-body", detail: (error as Error).message });
  }
  const items = value instanceof JSONObject && value.members.length === 1 ? value.get(collection) : undefined;
  if (!Array.isArray(items)) throw new FailedAnswer({ kind: "undecodable-body", detail: `not {"${collection}":[…]}` });
  return items.map((item) => {
    try {
      return recordFrom(item);
    } catch (error) {
      throw new FailedAnswer({ kind: "invalid-record", detail: (error as Error).message });
    }
  });
}

/** Records and digest after an answer. */
export interface Applied {
  readonly records: Map<string, string>;
  readonly digest: StateDigest;
}

/** Applies a 200 to `records` (id → canonical body) holding `digest`: a full answer replaces
 *  them, a delta upserts and removes; the result must sum to the answer's `Delta-Digest`.
 *  Throws `FailedAnswer` when it cannot be used. `records` is not changed. */
export function applyAnswer(records: ReadonlyMap<string, string>, digest: StateDigest, answer: Answer, collection: string): Applied {
  const wire = readBody(answer.body, collection);
  let next: Map<string, string>;
  let sum: StateDigest;
  const change = new DigestSum();
  if (answer.mode === "full") {
    next = new Map();
    for (const record of wire) {
      if (record.hidden) throw new FailedAnswer({ kind: "invalid-record", detail: `a hidden record in a full dataset (${record.id})` });
      if (next.has(record.id)) throw new FailedAnswer({ kind: "invalid-record", detail: `an id twice in a full dataset (${record.id})` });
      next.set(record.id, record.body);
      change.add(record.body);
    }
    sum = change.digest;
  } else {
    next = new Map(records);
    for (const record of wire) {
      const held = next.get(record.id);
      if (held !== undefined) change.add(held, -1);
      if (record.hidden) next.delete(record.id);
      else {
        next.set(record.id, record.body);
        change.add(record.body);
      }
    }
    sum = digest.plus(change);
  }
  if (sum.value !== answer.digest.value) {
    throw new FailedAnswer({ kind: "digest-mismatch", detail: `the records held sum to ${sum.hex.slice(0, 16)}…, Delta-Digest says ${answer.digest.hex.slice(0, 16)}…` });
  }
  return { records: next, digest: sum };
}
