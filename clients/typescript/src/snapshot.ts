// Reading a snapshot (docs/SNAPSHOT-FORMAT.md): one gzip member of lines (a manifest, the
// records, format 2.0's blobs, a trailer), checked while it streams. Nothing is handed over
// as installable before the verified end: the caller collects what it reads and installs it
// only once `read` returns.

import { DigestSum, type StateDigest } from "./digest.js";
import { ReplicaError } from "./errors.js";
import { JSONNumber, JSONObject, type JSONValue, type WireRecord, compareCodePoints, fromUTF8, parseJSON, recordFrom, wireText } from "./json.js";
import { scanCanonicalRecord } from "./scanner.js";
import { SHA256, hex, sha256 } from "./sha256.js";

/** One collection of a snapshot's manifest. */
export interface SnapshotCollection {
  /** The collection's name. */
  readonly name: string;
  /** The server's `ETag` for the state baked, byte for byte. */
  readonly etag: string;
  /** The server's `Last-Modified` for the state baked. */
  readonly lastModified: string;
  /** How many records follow for it. */
  readonly records: number;
  /** The state digest at `etag` (format 1.1 and later), 64 hex digits. */
  readonly digest: string | undefined;
}

/** A snapshot's first line. */
export interface SnapshotManifest {
  /** `"major.minor"`. */
  readonly version: string;
  /** In name order. */
  readonly collections: readonly SnapshotCollection[];
}

/** A blob a format 2.0 snapshot carries, whole and checked against its hash. */
export interface SnapshotBlob {
  /** The SHA-256 of its bytes, 64 lowercase hex digits. */
  readonly sha256: string;
  /** Its media type. */
  readonly type: string;
  /** Its bytes. */
  readonly bytes: Uint8Array;
}

/** Everything a snapshot holds, verified. */
export interface Snapshot {
  readonly manifest: SnapshotManifest;
  /** Each collection's records, in id order. */
  readonly records: ReadonlyMap<string, readonly WireRecord[]>;
  /** Each collection's state digest, summed from its records as they were read. */
  readonly digests: ReadonlyMap<string, StateDigest>;
  /** Format 2.0's blobs. */
  readonly blobs: readonly SnapshotBlob[];
  /** The SHA-256 of the file's bytes (as given, compressed), 64 hex digits: which bundled snapshot this is. */
  readonly sha256: string;
}

const blobLineBytes = 49_152;
const newline = 0x0a;

/** Reads and verifies a whole snapshot: throws `ReplicaError` (`snapshot`) saying what is wrong. */
export async function readSnapshot(file: ArrayBuffer | Uint8Array): Promise<Snapshot> {
  const bytes = file instanceof Uint8Array ? file : new Uint8Array(file);
  const reader = new SnapshotReader();
  const input = decompressed(bytes);
  let crc = 0xffffffff;
  let length = 0;
  for (;;) {
    const chunk = await next(input);
    if (chunk.done) break;
    crc = crc32(chunk.value, crc);
    length += chunk.value.length;
    reader.take(chunk.value);
  }
  // One gzip member and nothing after it: the file's last eight bytes are that member's CRC-32
  // and length of all the content (a decompressor may read on through padding or a second member).
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (bytes.length < 18 || view.getUint32(bytes.length - 8, true) !== (crc ^ 0xffffffff) >>> 0 || view.getUint32(bytes.length - 4, true) !== length % 0x100000000) {
    throw new ReplicaError("snapshot", "snapshot: bytes follow the gzip member, or it is not one member (its trailer does not end the file)");
  }
  return reader.finish(hex(sha256(bytes)));
}

const crcTable = (() => {
  const table = new Int32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    table[n] = c;
  }
  return table;
})();

/** CRC-32 (gzip's) of `bytes`, continuing from `crc` (start with 0xffffffff; finish with ^ 0xffffffff). */
function crc32(bytes: Uint8Array, crc: number): number {
  for (let i = 0; i < bytes.length; i++) crc = crcTable[(crc ^ bytes[i]!) & 0xff]! ^ (crc >>> 8);
  return crc;
}

/** The decompressed content of a gzip file, as a stream's reader. */
function decompressed(bytes: Uint8Array): ReadableStreamDefaultReader<Uint8Array> {
  try {
    return new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip")).getReader();
  } catch (error) {
    throw new ReplicaError("snapshot", "snapshot: cannot start decompressing", String(error));
  }
}

/** The next piece of decompressed content; a damaged or cut-off stream is the snapshot's error. */
async function next(input: ReadableStreamDefaultReader<Uint8Array>): Promise<ReadableStreamReadResult<Uint8Array>> {
  try {
    return await input.read();
  } catch (error) {
    throw new ReplicaError("snapshot", "snapshot: the gzip stream is damaged or cut short", error instanceof Error ? error.message : String(error));
  }
}

/** Reads only a snapshot's manifest (its first line), checked as `readSnapshot` checks it: what a
 *  replica that installed this snapshot before needs at open. */
export async function readManifest(file: ArrayBuffer | Uint8Array): Promise<SnapshotManifest> {
  const bytes = file instanceof Uint8Array ? file : new Uint8Array(file);
  const input = decompressed(bytes);
  const parts: Uint8Array[] = [];
  try {
    for (;;) {
      const chunk = await next(input);
      if (chunk.done) throw new ReplicaError("snapshot", "snapshot: no manifest line (cut short)");
      const end = chunk.value.indexOf(newline);
      parts.push(end < 0 ? chunk.value : chunk.value.subarray(0, end + 1));
      if (end >= 0) break;
    }
  } finally {
    await input.cancel().catch(() => undefined);
  }
  const reader = new SnapshotReader();
  for (const part of parts) reader.take(part);
  return reader.manifestRead();
}

/** The line-by-line checks, fed with decompressed bytes. */
class SnapshotReader {
  private pending: Uint8Array[] = [];
  private pendingLength = 0;
  private line = 0;
  private readonly hash = new SHA256();
  private manifest: SnapshotManifest | undefined;
  private major = 0;
  private collectionIndex = 0;
  private inCollection = 0;
  private lastId: string | undefined;
  private digest = new DigestSum();
  private readonly digests = new Map<string, StateDigest>();
  private totalRecords = 0;
  private readonly records = new Map<string, WireRecord[]>();
  private readonly referenced = new Set<string>();
  private readonly blobs: SnapshotBlob[] = [];
  private blob: { sha256: string; size: number; type: string; lines: number; parts: Uint8Array[]; received: number } | undefined;
  private lastBlob: string | undefined;
  private trailerSeen = false;

  private fail(why: string): never {
    throw new ReplicaError("snapshot", `snapshot: ${why}`);
  }

  take(chunk: Uint8Array): void {
    let start = 0;
    for (;;) {
      const end = chunk.indexOf(newline, start);
      if (end < 0) {
        if (start < chunk.length) {
          this.pending.push(chunk.subarray(start));
          this.pendingLength += chunk.length - start;
          if (this.pendingLength > 64 << 20) this.fail(`line ${this.line + 1} is longer than 64 MiB`);
        }
        return;
      }
      let lineBytes: Uint8Array;
      if (this.pending.length > 0) {
        lineBytes = new Uint8Array(this.pendingLength + end - start);
        let at = 0;
        for (const part of this.pending) {
          lineBytes.set(part, at);
          at += part.length;
        }
        lineBytes.set(chunk.subarray(start, end), at);
        this.pending = [];
        this.pendingLength = 0;
      } else {
        lineBytes = chunk.subarray(start, end);
      }
      this.lineRead(lineBytes);
      start = end + 1;
    }
  }

  private lineRead(bytes: Uint8Array): void {
    this.line += 1;
    if (this.trailerSeen) this.fail(`line ${this.line} follows the trailer`);
    if (this.line === 1) {
      this.readManifest(bytes);
    } else if (this.collectionIndex < this.manifest!.collections.length) {
      this.readRecord(bytes);
    } else if (this.blob) {
      this.readBlobLine(bytes);
    } else {
      const text = fromUTF8(bytes, "snapshot");
      if (this.major >= 2 && text.startsWith('{"$blob"')) {
        this.readBlobHeader(text);
      } else {
        this.readTrailer(text);
        return;
      }
    }
    this.hash.update(bytes);
    this.hash.update(newlineBytes);
  }

  private readManifest(bytes: Uint8Array): void {
    let value: JSONValue;
    try {
      value = parseJSON(fromUTF8(bytes, "snapshot"));
    } catch {
      this.fail("not a DeltaSnapshot snapshot (the first line is not a manifest)");
    }
    if (!(value instanceof JSONObject) || value.get("format") !== "deltasnap-snapshot") {
      this.fail("not a DeltaSnapshot snapshot (the first line is not a manifest)");
    }
    const version = value.get("version");
    const match = typeof version === "string" ? /^([0-9]+)\.([0-9]+)$/.exec(version) : null;
    if (!match) this.fail(`the manifest's version is not "major.minor" (${JSON.stringify(version)})`);
    this.major = Number(match[1]);
    if (this.major !== 1 && this.major !== 2) {
      this.fail(`format version ${version as string} is not readable by this build (this build reads 1.x and 2.x; update DeltaSnapshot)`);
    }
    const list = value.get("collections");
    if (!Array.isArray(list)) this.fail("the manifest has no collections array");
    const collections: SnapshotCollection[] = [];
    for (const item of list) {
      if (!(item instanceof JSONObject)) this.fail("a manifest collection is not an object");
      const name = item.get("name");
      const etag = item.get("etag");
      const lastModified = item.get("lastModified");
      const records = item.get("records");
      const digest = item.get("digest");
      if (typeof name !== "string" || !/^[A-Za-z0-9_-]{1,64}$/.test(name)) this.fail(`a manifest collection has no valid name (${JSON.stringify(name)})`);
      if (typeof etag !== "string" || typeof lastModified !== "string") this.fail(`collection ${name} has no etag or lastModified`);
      if (!(records instanceof JSONNumber) || records.sign < 0 || !Number.isSafeInteger(records.toNumber())) this.fail(`collection ${name} has no record count`);
      if (digest !== undefined && (typeof digest !== "string" || !/^[0-9a-f]{64}$/.test(digest))) this.fail(`collection ${name} has an invalid digest`);
      const previous = collections[collections.length - 1];
      if (previous && compareCodePoints(previous.name, name) >= 0) this.fail(`the manifest's collections are not sorted by name, each once (${name})`);
      collections.push({ name, etag, lastModified, records: records.toNumber(), digest: digest as string | undefined });
      this.records.set(name, []);
    }
    this.manifest = { version: version as string, collections };
    this.skipEmptyCollections();
  }

  private skipEmptyCollections(): void {
    const collections = this.manifest!.collections;
    while (this.collectionIndex < collections.length && this.inCollection === collections[this.collectionIndex]!.records) {
      const collection = collections[this.collectionIndex]!;
      const sum = this.digest.digest;
      if (collection.digest !== undefined && sum.hex !== collection.digest) {
        this.fail(`the records of ${collection.name} do not match the manifest's state digest (manifest ${collection.digest.slice(0, 16)}…, records ${sum.hex.slice(0, 16)}…)`);
      }
      this.digests.set(collection.name, sum);
      this.collectionIndex += 1;
      this.inCollection = 0;
      this.lastId = undefined;
      this.digest = new DigestSum();
    }
  }

  private readRecord(bytes: Uint8Array): void {
    const collection = this.manifest!.collections[this.collectionIndex]!;
    const text = fromUTF8(bytes, "snapshot");
    let record: WireRecord;
    // Most lines are proven canonical without a tree (scanner.ts); blob references need the tree.
    const scanned = this.major >= 2 && text.includes('"$blob"') ? undefined : scanCanonicalRecord(text);
    if (scanned !== undefined) {
      record = { id: scanned, hidden: false, body: text };
    } else {
      let value: JSONValue;
      try {
        value = parseJSON(text);
        record = recordFrom(value);
      } catch (error) {
        this.fail(`line ${this.line} is not a record (${error instanceof Error ? error.message : String(error)})`);
      }
      if (record.hidden) this.fail(`line ${this.line} is a hidden record; snapshots hold visible records only (${record.id})`);
      if (wireText(record) !== text) this.fail(`line ${this.line} is not in canonical form (${record.id})`);
      if (this.major >= 2) collectReferences(value, this.referenced);
    }
    if (this.lastId !== undefined && compareCodePoints(this.lastId, record.id) >= 0) {
      this.fail(`line ${this.line} breaks the id order of ${collection.name} (${JSON.stringify(record.id)} after ${JSON.stringify(this.lastId)})`);
    }
    this.lastId = record.id;
    // The line is the record's canonical body (checked above): hashed as read.
    this.digest.addBytes(bytes);
    this.records.get(collection.name)!.push(record);
    this.inCollection += 1;
    this.totalRecords += 1;
    this.skipEmptyCollections();
  }

  private readBlobHeader(text: string): void {
    let value: JSONValue;
    try {
      value = parseJSON(text);
    } catch {
      this.fail(`line ${this.line} is not a blob header`);
    }
    const reference = blobReference(value);
    if (!reference || `{"$blob":"${reference.sha256}","size":${reference.size},"type":${JSON.stringify(reference.type)}}` !== text) {
      this.fail(`line ${this.line} is not a canonical blob reference`);
    }
    if (this.lastBlob !== undefined && this.lastBlob >= reference.sha256) this.fail(`line ${this.line} breaks the blobs' hash order (${reference.sha256})`);
    if (!this.referenced.has(reference.sha256)) this.fail(`blob ${reference.sha256} is one no record references`);
    this.lastBlob = reference.sha256;
    this.blob = { ...reference, lines: Math.ceil(reference.size / blobLineBytes), parts: [], received: 0 };
    if (this.blob.lines === 0) this.endBlob();
  }

  private readBlobLine(bytes: Uint8Array): void {
    const blob = this.blob!;
    const due = Math.min(blobLineBytes, blob.size - blob.received);
    const text = fromUTF8(bytes, "snapshot");
    const decoded = text.length >= 2 && text.startsWith('"') && text.endsWith('"') ? decodeBase64(text.slice(1, -1)) : undefined;
    if (!decoded || decoded.length !== due) this.fail(`line ${this.line} is not the base64 of the ${due} bytes due for blob ${blob.sha256}`);
    blob.parts.push(decoded);
    blob.received += decoded.length;
    if (blob.received === blob.size) this.endBlob();
  }

  private endBlob(): void {
    const blob = this.blob!;
    const bytes = new Uint8Array(blob.size);
    let at = 0;
    for (const part of blob.parts) {
      bytes.set(part, at);
      at += part.length;
    }
    const actual = hex(sha256(bytes));
    if (actual !== blob.sha256) this.fail(`blob ${blob.sha256} does not match its hash (its bytes hash to ${actual})`);
    this.blobs.push({ sha256: blob.sha256, type: blob.type, bytes });
    this.blob = undefined;
  }

  private readTrailer(text: string): void {
    let value: JSONValue;
    try {
      value = parseJSON(text);
    } catch {
      this.fail(`line ${this.line} should be the trailer (more records than the manifest declares, or a damaged trailer)`);
    }
    if (!(value instanceof JSONObject) || value.get("sha256") === undefined) {
      this.fail(`line ${this.line} should be the trailer (more records than the manifest declares, or a damaged trailer)`);
    }
    const records = value.get("records");
    const digest = value.get("sha256");
    if (!(records instanceof JSONNumber) || records.text !== String(this.totalRecords)) {
      this.fail(`the trailer counts ${records instanceof JSONNumber ? records.text : "no"} records; ${this.totalRecords} were read`);
    }
    if (this.major >= 2) {
      const blobs = value.get("blobs");
      if (!(blobs instanceof JSONNumber) || blobs.text !== String(this.blobs.length)) {
        this.fail(`the trailer counts ${blobs instanceof JSONNumber ? blobs.text : "no"} blobs; ${this.blobs.length} were read`);
      }
      for (const hash of this.referenced) {
        if (!this.blobs.some((blob) => blob.sha256 === hash)) this.fail(`a record references blob ${hash}, which the snapshot does not hold`);
      }
    }
    const actual = hex(this.hash.digest());
    if (digest !== actual) this.fail(`the trailer's SHA-256 does not match the content (trailer ${String(digest).slice(0, 16)}…, content ${actual.slice(0, 16)}…)`);
    this.trailerSeen = true;
  }

  /** The manifest, once the first line was read. */
  manifestRead(): SnapshotManifest {
    if (!this.manifest) this.fail("no manifest line");
    return this.manifest;
  }

  finish(fileHash: string): Snapshot {
    if (this.pendingLength > 0) this.fail("the last line has no newline (cut short)");
    if (!this.manifest) this.fail("empty");
    if (!this.trailerSeen) this.fail("no trailer (cut short)");
    return { manifest: this.manifest, records: this.records, digests: this.digests, blobs: this.blobs, sha256: fileHash };
  }
}

const newlineBytes = new Uint8Array([newline]);

/** The blob reference `value` is, or undefined. */
export function blobReference(value: JSONValue): { sha256: string; size: number; type: string } | undefined {
  if (!(value instanceof JSONObject) || value.members.length !== 3) return undefined;
  const hash = value.get("$blob");
  const size = value.get("size");
  const type = value.get("type");
  if (typeof hash !== "string" || !/^[0-9a-f]{64}$/.test(hash)) return undefined;
  if (!(size instanceof JSONNumber) || size.sign < 0 || !Number.isSafeInteger(size.toNumber()) || size.text !== String(size.toNumber())) return undefined;
  if (typeof type !== "string") return undefined;
  return { sha256: hash, size: size.toNumber(), type };
}

/** Adds the hashes of every blob reference inside `value` to `into`. */
export function collectReferences(value: JSONValue, into: Set<string>): void {
  if (Array.isArray(value)) {
    for (const item of value) collectReferences(item, into);
  } else if (value instanceof JSONObject) {
    const hash = value.get("$blob");
    if (typeof hash === "string") into.add(hash);
    for (const [, item] of value.members) collectReferences(item, into);
  }
}

const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const decodeTable = new Int16Array(128).fill(-1);
for (let i = 0; i < alphabet.length; i++) decodeTable[alphabet.charCodeAt(i)] = i;

/** Standard base64 with padding, in its only spelling (stray bits refused), or undefined. */
export function decodeBase64(text: string): Uint8Array | undefined {
  if (text.length % 4 !== 0) return undefined;
  const padding = text.endsWith("==") ? 2 : text.endsWith("=") ? 1 : 0;
  const out = new Uint8Array((text.length / 4) * 3 - padding);
  let at = 0;
  for (let i = 0; i < text.length; i += 4) {
    const last = i + 4 === text.length;
    const values = [0, 0, 0, 0];
    for (let j = 0; j < 4; j++) {
      const c = text.charCodeAt(i + j);
      if (c === 61 && last && j >= 4 - padding) continue;
      const v = c < 128 ? decodeTable[c]! : -1;
      if (v < 0) return undefined;
      values[j] = v;
    }
    const n = (values[0]! << 18) | (values[1]! << 12) | (values[2]! << 6) | values[3]!;
    if (last && padding === 2 && (values[1]! & 0x0f) !== 0) return undefined;
    if (last && padding === 1 && (values[2]! & 0x03) !== 0) return undefined;
    out[at++] = (n >> 16) & 0xff;
    if (at < out.length) out[at++] = (n >> 8) & 0xff;
    if (at < out.length) out[at++] = n & 0xff;
  }
  return out;
}
