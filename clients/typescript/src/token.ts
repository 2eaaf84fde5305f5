// What a client may read of a token (docs/PROTOCOL.md, "What a client may read of a token"):
// the number of fields, the database identity, the position and the selection fingerprint.
// Nothing else: tokens are sent back exactly as received.

import { utf8 } from "./json.js";
import { hex, sha256 } from "./sha256.js";

/** The fields of an entity tag `W/"…"`, or undefined when it is not a token of this protocol. */
export function tokenFields(etag: string): string[] | undefined {
  if (!etag.startsWith('W/"') || !etag.endsWith('"') || etag.length < 5) return undefined;
  const fields = etag.slice(3, -1).split(".");
  if (fields[0] !== "1" || ![4, 7, 9].includes(fields.length)) return undefined;
  if (!/^[0-9a-f]{16}$/.test(fields[1]!) || !/^(0|[1-9][0-9]*)$/.test(fields[2]!)) return undefined;
  return fields;
}

/** The fingerprint of a selection: 16 hex digits of SHA-256 over the canonical filter, a line
 *  feed and the limit (each empty when absent). */
export function fingerprint(canonicalFilter: string | undefined, limit: number | undefined): string {
  return hex(sha256(utf8(`${canonicalFilter ?? ""}\n${limit === undefined ? "" : String(limit)}`))).slice(0, 16);
}

/** Whether a snapshot entry whose token is `etag` names the replica's selection
 *  (`selection` undefined: the whole collection). */
export function snapshotFits(etag: string, selection: { fingerprint: string } | undefined): boolean {
  const fields = tokenFields(etag);
  const whole = fingerprint(undefined, undefined);
  if (!fields) return selection === undefined;
  if (fields.length === 4) return selection === undefined;
  if (fields.length === 7) return selection !== undefined && fields[4] === selection.fingerprint;
  return fields[4] === (selection?.fingerprint ?? whole);
}

/** Whether a bundled snapshot entry's token `bundled` should replace what a replica holds:
 *  `installedFrom` (the token of the snapshot it was installed or reset from) and `held` (the
 *  token it holds now, empty after a cut-down install). */
export function isNewer(bundled: string, installedFrom: string, held: string): boolean {
  if (bundled === installedFrom || bundled === held) return false;
  const a = tokenFields(bundled);
  const b = tokenFields(held);
  if (!a || !b) return true;
  if (a[1] !== b[1]) return true;
  return BigInt(a[2]!) > BigInt(b[2]!);
}
