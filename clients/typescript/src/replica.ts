// The replica: a bundled snapshot installed and verified, kept current with exact deltas, written
// offline, queried and observed. The same semantics as DeltaClient's `Replica`
// (docs/CLIENT.md), written from docs/PROTOCOL.md and docs/SNAPSHOT-FORMAT.md.

import { type Answer, FailedAnswer, type Fetched, type ResetReason, type Validators, applyAnswer, excerpt, throwIfUnavailable, verdict } from "./answer.js";
import { type CollectionState, type Selection, collectionDocument, collectionFromDocument, collectionKey } from "./collection.js";
import { StateDigest } from "./digest.js";
import { ReplicaError } from "./errors.js";
import { type FilterInput, type SortKey, matches, parseFilter } from "./filter.js";
import { JSONNumber, JSONObject, type JSONValue, canonical, quote, compareCodePoints, fromJavaScript, parseJSON, parseRecord, recordFrom, toJavaScript, wireText } from "./json.js";
import { LiveQuery, type PreparedQuery, type QueryEntry, type VisibleRecords, admits, entryOf, page } from "./live.js";
import { type OutboxData, OutboxDraft, type PushResult, type PushSummary, emptyOutbox, splitWire } from "./outbox.js";
import { type Snapshot, type SnapshotManifest, blobReference, collectReferences, readManifest, readSnapshot } from "./snapshot.js";
import { hex, sha256 } from "./sha256.js";
import { MemoryStorage, type ReplicaStorage } from "./storage.js";
import { fingerprint, isNewer, snapshotFits, tokenFields } from "./token.js";

/** How to open a replica. */
export interface ReplicaOptions {
  /** The store's name: the IndexedDB database in a browser, the directory in Node (unless `storage` is given). */
  readonly name: string;
  /** The bundled snapshot's bytes (docs/SNAPSHOT-FORMAT.md). */
  readonly snapshot: ArrayBuffer | Uint8Array;
  /** The API's URL, such as `https://data.example.com/api`: collections are read at `<serverURL>/<collection>`. */
  readonly serverURL: string;
  /** A user's JSON Web Token, asked for at the start of each sync (and by `blob`, `updates`); undefined or null: no user. */
  readonly token?: () => string | null | undefined | Promise<string | null | undefined>;
  /** The apps' client key, for public data and `--client-writable` pushes (used when `token` gives none). */
  readonly clientKey?: string;
  /** Where the state lives; by default IndexedDB in a browser, a directory named `name` in Node. */
  readonly storage?: ReplicaStorage;
  /** The part of a collection to hold: `{ widgets: { filter: { color: { eq: "red" } }, limit: 100 } }`. */
  readonly selections?: Readonly<Record<string, { readonly filter?: FilterInput; readonly limit?: number }>>;
  /** The `fetch` to use (default: the global one). */
  readonly fetch?: typeof fetch;
  /** Seconds to wait for an answer. Default 60. */
  readonly requestTimeout?: number;
  /** The first back-off after a failed sync, in seconds. Default 1; it doubles up to `maximumBackoff`. */
  readonly initialBackoff?: number;
  /** The longest back-off, in seconds. Default 300. */
  readonly maximumBackoff?: number;
  /** How many mutations one push carries at most. Default 5,000. */
  readonly pushBatchSize?: number;
  /** Whether to ask for cacheable reads (`Delta-Redirect: 1`) and follow their `307`s. Default
   *  true; in a browser always false (`fetch` cannot read a redirect without following it). */
  readonly cacheableReads?: boolean;
}

/** A local query: which records, in what order, which part. */
export interface QueryOptions {
  /** The filter language of selections and rules (docs/PROTOCOL.md, "Selections"). */
  readonly filter?: FilterInput;
  /** Sort keys, most significant first: a member name (smallest first) or `{ member, descending }`. Ties come by id. */
  readonly order?: ReadonlyArray<string | SortKey>;
  /** At most this many records. */
  readonly limit?: number;
  /** Skips this many records of the ordered result first. */
  readonly offset?: number;
}

/** A file's reference, as records hold it (docs/PROTOCOL.md, "Files"). */
export interface BlobReference {
  /** The SHA-256 of its bytes, 64 lowercase hex digits. */
  readonly $blob: string;
  /** Its length in bytes. */
  readonly size: number;
  /** Its media type. */
  readonly type: string;
}

const mediaType = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+\/[!#$%&'*+.^_`|~0-9A-Za-z-]+( *;[ -~]*)?$/;

/** A record as the app sees it: a plain object with a string `id`. */
export type RecordObject = { readonly id: string } & Record<string, unknown>;

/** Where the replica is. */
export interface ReplicaStatus {
  /** `idle`, `syncing`, `backingOff` (until `retryAt`), or `closed`. */
  readonly phase: "idle" | "syncing" | "backingOff" | "closed";
  /** When the last sync succeeded. */
  readonly lastSync: Date | undefined;
  /** Records with writes not yet confirmed by the server. */
  readonly pending: number;
  /** Turned-down writes waiting for the app (`conflicts()`), denied ones included. */
  readonly conflicts: number;
  /** The last sync's error, until a sync succeeds. */
  readonly lastError: ReplicaError | undefined;
  /** During a back-off: when the next sync may send. */
  readonly retryAt: Date | undefined;
}

/** What one sync did to one collection. */
export interface CollectionSync {
  readonly collection: string;
  /** `notModified`, `updated`, `reset` (to the snapshot, then the answer), `resetDeferred` (too soon after the last), `signInRequired`. */
  readonly outcome: "notModified" | "updated" | "reset" | "resetDeferred" | "signInRequired";
  /** Why it reset (`server-signal:expired`, `digest-mismatch`, …). */
  readonly reset: string | undefined;
}

/** What a sync did. */
export interface SyncReport {
  readonly collections: readonly CollectionSync[];
  readonly pushed: PushSummary;
  /** A push the server refused for good: the pull went on, the writes stay queued. */
  readonly pushError: ReplicaError | undefined;
}

/** A turned-down write: the server's version and the local one. */
export interface Conflict {
  readonly collection: string;
  readonly id: string;
  /** `changed`, `hidden`, `exists`, `unknown-base`, `denied: <rule>`, `invalid: <why>`. */
  readonly reason: string;
  /** The server's record (with `hidden: true` when hidden), or undefined when it has none or the pusher may not read it. */
  readonly server: RecordObject | undefined;
  /** The local version, or undefined when it is a delete. */
  readonly local: RecordObject | undefined;
}

interface SyncData {
  failures: number;
  retryAt: number | null;
  lastSuccess: number | null;
  lastFailure: string | null;
  user: string | null;
  streaks: Record<string, { kind: string; started: number; count: number; last: number }>;
}

interface Subscription {
  readonly collection: string;
  readonly live: LiveQuery;
  readonly callback: (records: RecordObject[]) => void;
}

const hour = 3_600_000;

/** A replica of a DeltaSnapshot server's collections. */
export class Replica {
  private readonly options: ReplicaOptions;
  private readonly storage: ReplicaStorage;
  private readonly manifest: SnapshotManifest;
  /** The bundled snapshot's content, read (and verified) only when needed: to install, reset or sign out. */
  private content: Promise<Snapshot> | undefined;
  private readonly selections: ReadonlyMap<string, Selection>;
  private readonly doFetch: typeof fetch;
  private state = new Map<string, CollectionState>();
  private outboxData: OutboxData;
  private syncData: SyncData;
  private queue: Promise<unknown> = Promise.resolve();
  private running: Promise<SyncReport> | undefined;
  private signingOut = false;
  private closed = false;
  private currentStatus: ReplicaStatus;
  private readonly statusWatchers = new Set<(status: ReplicaStatus) => void>();
  private readonly subscriptions = new Set<Subscription>();
  private readonly parsed = new Map<string, Map<string, { body: string; value: JSONObject }>>();
  private readonly readOnly = new Set<string>();
  /** Files the server refused for good during the current sync (reported in its `pushError`). */
  private uploadRefusals: string[] = [];
  /** Set when this runtime's `fetch` turned out to make redirects opaque (a Web Worker): reads stay direct. */
  private redirectsOpaque = false;

  private constructor(options: ReplicaOptions, storage: ReplicaStorage, manifest: SnapshotManifest, selections: Map<string, Selection>, outbox: OutboxData, sync: SyncData) {
    this.options = options;
    this.storage = storage;
    this.manifest = manifest;
    this.selections = selections;
    this.doFetch = options.fetch ?? ((input, init) => fetch(input, init));
    this.outboxData = outbox;
    this.syncData = sync;
    this.currentStatus = { phase: "idle", lastSync: undefined, pending: 0, conflicts: 0, lastError: undefined, retryAt: undefined };
  }

  /** Opens the replica: reads the bundled snapshot's manifest, and installs each collection the
   *  store does not hold yet (or holds from an older snapshot, or for another selection) from the
   *  whole snapshot, verified to its trailer first. Throws `ReplicaError`. */
  static async open(options: ReplicaOptions): Promise<Replica> {
    if (!options.name) throw new ReplicaError("configuration", "Replica.open: a name is required");
    try {
      new URL(options.serverURL);
    } catch {
      throw new ReplicaError("configuration", "Replica.open: serverURL is not a URL", options.serverURL);
    }
    // The manifest alone at first: a replica that installed this snapshot before needs nothing else of it.
    const bundled = { manifest: await readManifest(options.snapshot) };
    const selections = new Map<string, Selection>();
    for (const [name, selection] of Object.entries(options.selections ?? {})) {
      if (!bundled.manifest.collections.some((c) => c.name === name)) {
        throw new ReplicaError("configuration", "Replica.open: a selection names a collection the snapshot does not hold", name);
      }
      const limit = selection.limit;
      if (limit !== undefined && (!Number.isInteger(limit) || limit < 1 || limit > 100_000_000)) {
        throw new ReplicaError("configuration", "Replica.open: a selection's limit is a whole number from 1 to 100,000,000", `${name}: ${limit}`);
      }
      const parsed = selection.filter === undefined ? undefined : parseFilter(selection.filter);
      selections.set(name, {
        filter: parsed?.filter,
        canonicalFilter: parsed?.canonical,
        limit,
        fingerprint: fingerprint(parsed?.canonical, limit),
      });
    }
    const storage = options.storage ?? (await defaultStorage(options.name));
    const storedOutbox = (await storage.read("outbox")) as OutboxData | undefined;
    const outbox = storedOutbox ?? emptyOutbox();
    const sync = ((await storage.read("sync")) as SyncData | undefined) ?? { failures: 0, retryAt: null, lastSuccess: null, lastFailure: null, user: null, streaks: {} };
    const replica = new Replica(options, storage, bundled.manifest, selections, outbox, sync);
    const group = new Map<string, unknown>();
    for (const entry of bundled.manifest.collections) {
      const stored = await storage.read(collectionKey(entry.name));
      const selection = selections.get(entry.name);
      const wanted = selection?.fingerprint ?? fingerprint(undefined, undefined);
      let state = stored === undefined ? undefined : collectionFromDocument(entry.name, stored);
      if (!state || state.fingerprint !== wanted || isNewer(entry.etag, state.installedFrom, state.etag)) {
        // Installed from the whole snapshot, verified to its trailer first.
        state = await replica.pristine(entry.name);
        group.set(collectionKey(entry.name), collectionDocument(state));
      }
      replica.state.set(entry.name, state);
    }
    if (!storedOutbox) group.set("outbox", outbox);
    if (group.size > 0) await storage.write(group);
    // A format 2.0 snapshot's files, checked against their hashes as it was read: the app's own, offline.
    if (replica.content && (await replica.content).blobs.length > 0) {
      const held = new Set(await storage.blobNames());
      for (const blob of (await replica.content).blobs) if (!held.has(blob.sha256)) await storage.writeBlob(blob.sha256, blob.bytes);
    }
    // Read again when a reset or a sign-out needs it: not kept in memory beside the replica's own copy.
    replica.content = undefined;
    replica.updateStatus({ lastSync: sync.lastSuccess === null ? undefined : new Date(sync.lastSuccess) });
    return replica;
  }

  /** The collections the replica holds: the bundled snapshot's. */
  get collections(): string[] {
    return this.manifest.collections.map((c) => c.name);
  }

  /** The bundled snapshot's content, read and verified once, when first needed. */
  private snapshotContent(): Promise<Snapshot> {
    if (!this.content) {
      this.content = readSnapshot(this.options.snapshot);
      // A failed read is tried again next time (it may have been a passing failure).
      this.content.catch(() => (this.content = undefined));
    }
    return this.content;
  }

  /** This install's client id (pushes are numbered under it). */
  get clientID(): string {
    return this.outboxData.clientID;
  }

  /** Where the replica is now. */
  get status(): ReplicaStatus {
    return this.currentStatus;
  }

  /** Calls `callback` with the status now and after every change; returns a function that stops it. */
  observeStatus(callback: (status: ReplicaStatus) => void): () => void {
    this.statusWatchers.add(callback);
    callback(this.currentStatus);
    return () => this.statusWatchers.delete(callback);
  }

  // MARK: - Reading

  /** The record `id` of `collection` as the app sees it (its own writes included), or undefined. */
  async get(collection: string, id: string): Promise<RecordObject | undefined> {
    this.known(collection);
    const overlay = new OutboxDraft(this.outboxData).overlayOf(collection, id);
    if (overlay) return overlay.hidden ? undefined : (toJavaScript(parseJSON(overlay.body)) as RecordObject);
    const body = this.state.get(collection)!.records.get(id);
    return body === undefined ? undefined : (toJavaScript(this.parse(collection, id, body)) as RecordObject);
  }

  /** The records of `collection` that match, ordered and cut as asked. */
  async query(collection: string, query: QueryOptions = {}): Promise<RecordObject[]> {
    this.known(collection);
    return this.run(collection, prepare(query)).map((value) => toJavaScript(value) as RecordObject);
  }

  /** How many records of `collection` match `query.filter`. */
  async count(collection: string, query: QueryOptions = {}): Promise<number> {
    this.known(collection);
    const prepared = prepare(query);
    if (!prepared.filter) {
      // Without a filter, no record needs reading: the server's records, with the app's own writes over them.
      const records = this.state.get(collection)!.records;
      let count = records.size;
      for (const entry of this.outboxData.overlay) {
        if (entry.collection !== collection) continue;
        const held = records.has(entry.id);
        if (held && entry.hidden) count -= 1;
        else if (!held && !entry.hidden) count += 1;
      }
      return count;
    }
    return this.run(collection, { filter: prepared.filter, order: [], limit: undefined, offset: 0 }).length;
  }

  /** Calls `callback` with the query's records now, and again each time they change: after a
   *  sync, a reset, a local write or a sign-out; never for a change that does not alter them.
   *  Returns a function that stops it. */
  observe(collection: string, query: QueryOptions, callback: (records: RecordObject[]) => void): () => void {
    this.known(collection);
    const subscription: Subscription = { collection, live: new LiveQuery(prepare(query)), callback };
    this.subscriptions.add(subscription);
    this.deliver(subscription);
    return () => {
      this.subscriptions.delete(subscription);
    };
  }

  private deliver(subscription: Subscription): void {
    if (!this.subscriptions.has(subscription)) return;
    const collection = subscription.collection;
    const records = subscription.live.refresh(this.visibleRecords(collection), (id, body) => this.parse(collection, id, body));
    // Records are frozen and shared between calls: an unchanged record is the same object as before.
    if (records) report(() => subscription.callback(records as RecordObject[]));
  }

  private notify(collections: Iterable<string>): void {
    const names = new Set(collections);
    for (const subscription of this.subscriptions) if (names.has(subscription.collection)) this.deliver(subscription);
  }

  /** The visible records of `collection` as the app sees them: the server's, with the app's own writes over them. */
  private visibleRecords(collection: string): VisibleRecords {
    const state = this.state.get(collection)!;
    const overlay = new Map<string, { hidden: boolean; body: string }>();
    for (const entry of this.outboxData.overlay) if (entry.collection === collection) overlay.set(entry.id, entry);
    return (visit) => {
      for (const [id, body] of state.records) if (!overlay.has(id)) visit(id, body);
      for (const [id, entry] of overlay) if (!entry.hidden) visit(id, entry.body);
    };
  }

  /** The visible records as the app sees them, matched, sorted and cut. */
  private run(collection: string, query: PreparedQuery): JSONObject[] {
    const found: QueryEntry[] = [];
    // The same cache for the server's records and local versions: an unchanged body is not parsed again.
    this.visibleRecords(collection)((id, body) => {
      const value = this.parse(collection, id, body);
      if (admits(query, value)) found.push(entryOf(query, id, body, value));
    });
    return page(query, found).map((entry) => entry.value);
  }

  private parse(collection: string, id: string, body: string): JSONObject {
    let cache = this.parsed.get(collection);
    if (!cache) {
      cache = new Map();
      this.parsed.set(collection, cache);
    }
    const hit = cache.get(id);
    if (hit && hit.body === body) return hit.value;
    const value = parseJSON(body) as JSONObject;
    cache.set(id, { body, value });
    return value;
  }

  private known(collection: string): void {
    if (this.closed) throw new ReplicaError("closed", "the replica is closed");
    if (!this.state.has(collection)) {
      throw new ReplicaError("configuration", "the replica holds no such collection", `${collection}; it holds ${this.collections.join(", ") || "none"}`);
    }
  }

  // MARK: - Writing

  /** Writes `record` (an object with a string `id`) locally, at once; the next sync pushes it. */
  async put(collection: string, record: Readonly<Record<string, unknown>>): Promise<void> {
    this.known(collection);
    this.writable(collection);
    const value = fromJavaScript(record);
    if (!(value instanceof JSONObject)) throw new ReplicaError("invalidRecord", "record: not an object");
    const content = new JSONObject(value.members.filter(([key]) => key !== "hidden") as Array<readonly [string, JSONValue]>);
    const wire = parseRecord(canonical(content));
    await this.exclusive(async () => {
      const draft = new OutboxDraft(structuredClone(this.outboxData) as OutboxData);
      const etag = this.baseOf(collection);
      const exists = this.visible(draft, collection, wire.id);
      draft.show(collection, wire.id, false, wire.body, etag);
      draft.enqueue("put", collection, wire.id, wire.body, !exists, etag);
      await this.commit({ outbox: draft.data }, [collection], { showFirst: true });
    });
  }

  /** Deletes (hides) the record `id` locally, at once; the next sync pushes it. */
  async delete(collection: string, id: string): Promise<void> {
    this.known(collection);
    this.writable(collection);
    // The id is checked as a record's: 1 to 512 UTF-8 bytes, no NUL, well-formed.
    if (typeof id !== "string") throw new ReplicaError("invalidRecord", 'record: "id" must be a string', String(id));
    parseRecord(canonical(fromJavaScript({ id })));
    await this.exclusive(async () => {
      const draft = new OutboxDraft(structuredClone(this.outboxData) as OutboxData);
      const state = this.state.get(collection)!;
      const body = draft.overlayOf(collection, id)?.body ?? state.records.get(id) ?? canonical(new JSONObject([["id", id]]));
      draft.show(collection, id, true, body, this.baseOf(collection));
      draft.enqueue("delete", collection, id, null, false, this.baseOf(collection));
      await this.commit({ outbox: draft.data }, [collection], { showFirst: true });
    });
  }

  private writable(collection: string): void {
    if (this.signingOut) throw new ReplicaError("configuration", "the replica is signing out; the write was not kept", collection);
    if (this.readOnly.has(collection)) {
      throw new ReplicaError("refused", "the server takes no writes to this collection from this credential", `${collection}: denied: collection`);
    }
  }

  /** The base of an edit of `collection`: the token held; before the first sync of a selection
   *  installed cut down (no token yet), the token of the snapshot its records were cut from. */
  private baseOf(collection: string): string {
    const state = this.state.get(collection)!;
    return state.etag !== "" ? state.etag : state.installedFrom;
  }

  private visible(draft: OutboxDraft, collection: string, id: string): boolean {
    const overlay = draft.overlayOf(collection, id);
    if (overlay) return !overlay.hidden;
    return this.state.get(collection)!.records.has(id);
  }

  /** The turned-down writes, denied ones included, in collection and id order. */
  async conflicts(): Promise<Conflict[]> {
    const draft = new OutboxDraft(this.outboxData);
    return [...this.outboxData.conflicts]
      .sort((a, b) => compareCodePoints(a.collection, b.collection) || compareCodePoints(a.id, b.id))
      .map((conflict) => {
        const local = draft.overlayOf(conflict.collection, conflict.id);
        let server: RecordObject | undefined;
        if (conflict.server !== null) {
          const split = splitWire(conflict.server);
          server = { ...(toJavaScript(parseJSON(split.body)) as RecordObject), ...(split.hidden ? { hidden: true } : {}) };
        }
        return {
          collection: conflict.collection,
          id: conflict.id,
          reason: conflict.reason,
          server,
          local: local && !local.hidden ? (toJavaScript(parseJSON(local.body)) as RecordObject) : undefined,
        };
      });
  }

  /** Settles a conflict: `"server"` keeps the server's version (discarding the local write),
   *  `"local"` sends the local version again on top of the server's, a record sends that merge. */
  async resolve(collection: string, id: string, keep: "server" | "local" | Readonly<Record<string, unknown>>): Promise<void> {
    this.known(collection);
    let merged: { body: string } | undefined;
    if (typeof keep === "object") {
      const value = fromJavaScript(keep);
      if (!(value instanceof JSONObject)) throw new ReplicaError("invalidRecord", "record: not an object");
      const wire = parseRecord(canonical(new JSONObject(value.members.filter(([key]) => key !== "hidden") as Array<readonly [string, JSONValue]>)));
      if (wire.id !== id) throw new ReplicaError("configuration", "a merged record must keep its id", `${JSON.stringify(wire.id)} for ${JSON.stringify(id)}`);
      merged = { body: wire.body };
    }
    await this.exclusive(async () => {
      const draft = new OutboxDraft(structuredClone(this.outboxData) as OutboxData);
      if (!draft.conflictOf(collection, id)) throw new ReplicaError("configuration", "no conflict to resolve", `${collection}/${id}`);
      draft.resolve(collection, id, merged ?? (keep as "server" | "local"), this.baseOf(collection));
      await this.commit({ outbox: draft.data }, [collection]);
    });
  }

  // MARK: - Files

  /** Keeps `bytes` as a file offline and returns its blob reference, to put in a record
   *  (`{ $blob, size, type }`); the next sync uploads it before the writes that reference it. */
  async attach(bytes: Uint8Array | ArrayBuffer, type: string): Promise<BlobReference> {
    if (this.closed) throw new ReplicaError("closed", "the replica is closed");
    if (!mediaType.test(type) || type.length < 3 || type.length > 255) {
      throw new ReplicaError("configuration", "attach: not a media type (type/subtype, printable ASCII, 3 to 255 bytes)", type);
    }
    const data = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
    const name = hex(sha256(data));
    const reference: BlobReference = { $blob: name, size: data.length, type };
    await this.storage.writeBlob(name, data);
    await this.exclusive(async () => {
      const draft = structuredClone(this.outboxData) as OutboxData;
      draft.uploads = draft.uploads ?? [];
      if (!draft.uploads.some((upload) => upload.sha256 === name)) draft.uploads.push({ sha256: name, size: data.length, type });
      await this.commit({ outbox: draft }, []);
    });
    return reference;
  }

  /** The bytes of the file `reference` names (a blob reference from a record): the local copy
   *  when there is one (attached, from the snapshot, downloaded before), else downloaded with the
   *  replica's credential, checked against its hash and size, and kept. */
  async blob(reference: BlobReference): Promise<Uint8Array> {
    if (this.closed) throw new ReplicaError("closed", "the replica is closed");
    const checked = blobReference(fromJavaScript(reference));
    if (!checked) throw new ReplicaError("configuration", "blob: not a blob reference ({ $blob, size, type })", JSON.stringify(reference));
    const local = await this.storage.readBlob(checked.sha256);
    if (local) return local;
    const url = this.blobURL(checked.sha256);
    const credential = await this.credential();
    const answer = await this.request(url, { method: "GET", headers: credential ? { Authorization: credential } : {} });
    throwIfUnavailable(answer, "the server cannot send the file now");
    if (answer.status !== 200) {
      throw new ReplicaError("refused", "the server sends no such file to this replica's credential", `${checked.sha256}: HTTP ${answer.status}`);
    }
    const actual = hex(sha256(answer.body));
    if (actual !== checked.sha256 || answer.body.length !== checked.size) {
      throw new ReplicaError("unusableAnswer", "the file the server sent does not match its reference; nothing was kept", `${checked.sha256}: ${answer.body.length} bytes hashing to ${actual}`);
    }
    await this.storage.writeBlob(checked.sha256, answer.body);
    return answer.body;
  }

  /** Uploads the files attached offline (before the writes that reference them are pushed). */
  private async upload(credential: string | undefined): Promise<void> {
    for (const upload of [...(this.outboxData.uploads ?? [])]) {
      if (credential === undefined) {
        throw new ReplicaError("configuration", "files wait to be uploaded, but the replica has no credential: give Replica.open a token or a clientKey", upload.sha256);
      }
      const bytes = await this.storage.readBlob(upload.sha256);
      if (bytes) {
        const url = this.blobURL(upload.sha256);
        const answer = await this.request(url, { method: "PUT", headers: { Authorization: credential, "Content-Type": upload.type }, body: bytes });
        throwIfUnavailable(answer, "the server cannot take the file now");
        // Refused for good (too large, not this credential's to store): dropped, so that the writes
        // behind it still go; those that reference it come back as turned down (`invalid: blob-missing`).
        // 401, 403 and 408 refuse the credential, the server's writes or the moment, not the file: the writes stay queued.
        if ([401, 403, 408].includes(answer.status)) {
          throw new ReplicaError("refused", "the server refused to take a file now; the writes stay queued", `${upload.sha256}: HTTP ${answer.status}: ${excerpt(answer)}`);
        }
        if (answer.status !== 200) this.uploadRefusals.push(`${upload.sha256}: HTTP ${answer.status}: ${excerpt(answer)}`);
      }
      await this.exclusive(async () => {
        const draft = structuredClone(this.outboxData) as OutboxData;
        draft.uploads = (draft.uploads ?? []).filter((entry) => entry.sha256 !== upload.sha256);
        await this.commit({ outbox: draft }, []);
      });
    }
  }

  /** Forgets the files no record the replica holds references, but the snapshot's (after a sign-out). */
  private async forgetUnreferencedBlobs(): Promise<void> {
    const keep = new Set((await this.snapshotContent()).blobs.map((blob) => blob.sha256));
    for (const state of this.state.values()) {
      for (const body of state.records.values()) if (body.includes('"$blob"')) collectReferences(parseJSON(body), keep);
    }
    for (const name of await this.storage.blobNames()) if (!keep.has(name)) await this.storage.deleteBlob(name);
  }

  // MARK: - Syncing

  /** Pushes the queued writes, then pulls every collection. One sync runs at a time: a call made
   *  while one runs gets its report. Throws `ReplicaError`; a network failure, a 5xx or a 429
   *  leave the data as it was and start a back-off, during which `sync()` throws `backingOff`
   *  without sending anything (`{ force: true }` tries anyway). */
  sync(options: { force?: boolean } = {}): Promise<SyncReport> {
    if (this.closed) return Promise.reject(new ReplicaError("closed", "the replica is closed"));
    if (this.signingOut) return Promise.reject(new ReplicaError("configuration", "sync: the replica is signing out; sync again once signOut returns"));
    if (!this.running) {
      this.running = this.runSync(options.force === true).finally(() => {
        this.running = undefined;
      });
    }
    return this.running;
  }

  private async runSync(force: boolean): Promise<SyncReport> {
    try {
      if (!force && this.syncData.retryAt !== null && Date.now() < this.syncData.retryAt) {
        throw new ReplicaError(
          "backingOff",
          "the last sync failed; waiting before the next attempt (sync({ force: true }) tries now)",
          `retry at ${new Date(this.syncData.retryAt).toISOString()}${this.syncData.lastFailure ? `; the last failure: ${this.syncData.lastFailure}` : ""}`,
          new Date(this.syncData.retryAt),
        );
      }
      this.updateStatus({ phase: "syncing" });
      const credential = await this.credential();
      await this.checkUser(credential);
      let pushed: PushSummary = { applied: 0, unchanged: 0, conflicts: [] };
      let pushError: ReplicaError | undefined;
      try {
        this.uploadRefusals = [];
        await this.upload(credential);
        pushed = await this.push(credential);
        if (this.uploadRefusals.length > 0) {
          pushError = new ReplicaError("refused", "the server refused files; the writes that reference them are turned down (conflicts())", this.uploadRefusals.join("; "));
        }
      } catch (error) {
        if (!(error instanceof ReplicaError)) throw error;
        pushError = error;
      }
      const results: CollectionSync[] = [];
      for (const collection of this.collections) {
        if (this.closed) throw new ReplicaError("closed", "the replica is closed");
        results.push(await this.pull(collection, credential));
      }
      if (pushError?.isTransient) throw pushError;
      await this.exclusive(() =>
        this.commit({ sync: { ...this.syncData, failures: 0, retryAt: null, lastFailure: null, lastSuccess: Date.now() } }, []),
      );
      this.updateStatus({ phase: "idle", lastSync: new Date(this.syncData.lastSuccess!), lastError: pushError, retryAt: undefined });
      return { collections: results, pushed, pushError };
    } catch (error) {
      const failure = error instanceof ReplicaError ? error : new ReplicaError("store", "the sync failed", String(error));
      if (failure.kind === "backingOff" || failure.kind === "closed") {
        this.updateStatus({ phase: failure.kind === "closed" ? "closed" : "backingOff", lastError: this.currentStatus.lastError ?? failure });
        throw failure;
      }
      const failures = this.syncData.failures + 1;
      const delay = Math.max(this.backoff(failures), failure.retryAt ? failure.retryAt.getTime() - Date.now() : 0);
      const retryAt = Date.now() + delay;
      const retrying = new ReplicaError(failure.kind, failure.reason, failure.evidence, new Date(retryAt));
      try {
        await this.exclusive(() => this.commit({ sync: { ...this.syncData, failures, retryAt, lastFailure: failure.message } }, []));
      } catch {
        // The failure stays the error; without space to note it, the next sync is not held back.
      }
      this.updateStatus({ phase: "backingOff", lastError: retrying, retryAt: new Date(retryAt) });
      throw retrying;
    }
  }

  private backoff(failures: number): number {
    const initial = (this.options.initialBackoff ?? 1) * 1000;
    const maximum = (this.options.maximumBackoff ?? 300) * 1000;
    return Math.min(initial * 2 ** Math.min(failures - 1, 30), maximum);
  }

  /** The `Authorization` value: the user's token, else the client key. */
  private async credential(): Promise<string | undefined> {
    const token = this.options.token ? await this.options.token() : undefined;
    if (token) return `Bearer ${token}`;
    return this.options.clientKey ? `Bearer ${this.options.clientKey}` : undefined;
  }

  /** Another user's token signs the previous one out before anything is sent. */
  private async checkUser(credential: string | undefined): Promise<void> {
    const user = credential === undefined ? null : subject(credential.slice("Bearer ".length));
    if (user === null) return;
    const held = this.syncData.user;
    if (held !== null && held !== user) {
      const tally = new OutboxDraft(this.outboxData).tally();
      if (tally.queued + tally.conflicts + tally.denied > 0) {
        throw new ReplicaError(
          "configuration",
          `another user signed in while ${JSON.stringify(held)}'s writes are not settled: sync them, resolve them, or signOut({ discardPendingWrites: true })`,
          `${tally.queued} queued, ${tally.conflicts} conflicts, ${tally.denied} denied`,
        );
      }
      await this.signOutNow();
    }
    if (held !== user) {
      await this.exclusive(async () => {
        const outbox = held === null && this.outboxData.lastMutation > 0 ? this.newClient() : undefined;
        await this.commit({ sync: { ...this.syncData, user }, ...(outbox ? { outbox } : {}) }, []);
      });
      this.readOnly.clear();
    }
  }

  /** The outbox under a new client id, numbered again from 1: for a user's first sign-in on an
   *  install that pushed with the client key (a client id belongs to who first pushed with it). */
  private newClient(): OutboxData {
    const data = structuredClone(this.outboxData) as OutboxData;
    const draft = new OutboxDraft(data);
    const acknowledged = new Set(data.acknowledged.map((a) => `${a.collection}\u0000${a.recordId}`));
    data.overlay = data.overlay.filter((entry) => {
      const key = `${entry.collection}\u0000${entry.id}`;
      if (!acknowledged.has(key)) return true;
      return data.mutations.some((m) => m.collection === entry.collection && m.recordId === entry.id) || draft.conflictOf(entry.collection, entry.id) !== undefined;
    });
    data.acknowledged = [];
    for (const m of data.mutations) m.mutation = null;
    data.lastMutation = 0;
    data.clientID = emptyOutbox().clientID;
    return data;
  }

  /** `PUT` and `GET /blobs/{sha256}`, beside the API. */
  private blobURL(sha256: string): string {
    return new URL(`../blobs/${sha256}`, this.options.serverURL.replace(/\/*$/, "/")).toString();
  }

  private pushURL(): string {
    return new URL("../push", this.options.serverURL.replace(/\/*$/, "/")).toString();
  }

  private collectionURL(collection: string): string {
    const base = `${this.options.serverURL.replace(/\/+$/, "")}/${collection}`;
    const selection = this.selections.get(collection);
    const parameters: string[] = [];
    if (selection?.canonicalFilter !== undefined) parameters.push(`filter=${encodeURIComponent(selection.canonicalFilter)}`);
    if (selection?.limit !== undefined) parameters.push(`limit=${selection.limit}`);
    return parameters.length === 0 ? base : `${base}?${parameters.join("&")}`;
  }

  /** One request, with a timeout; network failures become `ReplicaError` (`network`). */
  private async request(url: string, init: RequestInit): Promise<Fetched> {
    const timeout = (this.options.requestTimeout ?? 60) * 1000;
    let response: Response;
    let body: Uint8Array;
    try {
      response = await this.doFetch(url, { ...init, signal: timeoutSignal(timeout), cache: "no-store", credentials: "omit" });
      body = new Uint8Array(await response.arrayBuffer());
    } catch (error) {
      throw new ReplicaError("network", "no answer from the server", `${url}: ${error instanceof Error ? error.message : String(error)}`);
    }
    return { status: response.status, header: (name) => response.headers.get(name), body };
  }

  // MARK: Pushing

  private async push(credential: string | undefined): Promise<PushSummary> {
    const summary: PushSummary = { applied: 0, unchanged: 0, conflicts: [] };
    const limit = this.options.pushBatchSize ?? 5_000;
    let restarted = false;
    for (;;) {
      const batch = await this.exclusive(async () => {
        const draft = new OutboxDraft(structuredClone(this.outboxData) as OutboxData);
        const batch = draft.nextBatch(limit);
        if (batch.length > 0 && batch.some((m) => !this.outboxData.mutations.some((o) => o.seq === m.seq && o.mutation === m.mutation))) {
          // Numbered before they leave: from now on they may reach the server, so they are never collapsed.
          await this.commit({ outbox: draft.data }, []);
        }
        return batch;
      });
      if (batch.length === 0) return summary;
      if (credential === undefined) {
        throw new ReplicaError("configuration", "writes wait to be pushed, but the replica has no credential: give Replica.open a token or a clientKey", `${batch.length} queued`);
      }
      // Written by hand: records go as their canonical bytes, exactly as stored (JSON.stringify
      // would lose number digits), every string in canonical form.
      const mutations = batch.map((m) => {
        const members = [`"id":${m.mutation}`, `"collection":${quote(m.collection)}`, `"op":${quote(m.op)}`];
        members.push(m.op === "put" ? `"record":${m.body!}` : `"recordId":${quote(m.recordId)}`);
        members.push(`"base":${m.base === null ? "null" : quote(m.base)}`);
        if (m.create) members.push('"create":true');
        return `{${members.join(",")}}`;
      });
      const text = `{"client":${quote(this.outboxData.clientID)},"mutations":[${mutations.join(",")}]}`;
      const answer = await this.request(this.pushURL(), {
        method: "POST",
        headers: { "Content-Type": "application/json", Authorization: credential },
        body: text,
      });
      if (answer.status === 200) {
        const results = parsePushAnswer(answer.body);
        if (results.length !== batch.length || results.some((result, i) => result.id !== batch[i]!.mutation)) {
          throw new ReplicaError("unusableAnswer", "the push answer does not answer the mutations sent", `${batch.length} sent, ${results.length} answered`);
        }
        await this.exclusive(async () => {
          const draft = new OutboxDraft(structuredClone(this.outboxData) as OutboxData);
          const settled = draft.settle(results, batch);
          summary.applied += settled.applied;
          summary.unchanged += settled.unchanged;
          for (const conflict of settled.conflicts) {
            summary.conflicts = summary.conflicts.filter((c) => !(c.collection === conflict.collection && c.id === conflict.id));
            summary.conflicts.push(conflict);
            if (conflict.reason === "denied: collection") this.readOnly.add(conflict.collection);
          }
          await this.commit({ outbox: draft.data }, new Set(batch.map((m) => m.collection)));
        });
        continue;
      }
      throwIfUnavailable(answer, "the server cannot take the push now");
      if (answer.status === 409 && !restarted) {
        const last = lastMutationId(answer.body);
        if (last !== undefined && last + 1 < batch[0]!.mutation!) {
          // The server has none of this client's mutations after its last: a new database. Number again from there, once.
          restarted = true;
          await this.exclusive(async () => {
            const draft = new OutboxDraft(structuredClone(this.outboxData) as OutboxData);
            draft.restartNumbering(last, (collection) => this.baseOf(collection));
            await this.commit({ outbox: draft.data }, []);
          });
          continue;
        }
      }
      throw new ReplicaError("refused", "the server refused the push; the writes stay queued", `HTTP ${answer.status}: ${excerpt(answer)}`);
    }
  }

  // MARK: Pulling

  private async pull(collection: string, credential: string | undefined): Promise<CollectionSync> {
    const state = this.state.get(collection)!;
    const sent: Validators | undefined = state.etag === "" ? undefined : { etag: state.etag, lastModified: state.lastModified };
    const confirming = new OutboxDraft(this.outboxData).awaitsConfirmation(collection);
    const fetched = await this.read(collection, sent, credential, confirming);
    if (fetched.status === 401 && problemType(fetched) === "urn:deltasnap:problem:unauthorized") {
      return { collection, outcome: "signInRequired", reset: undefined };
    }
    const isPrivate = (fetched.header("cache-control") ?? "").includes("private");
    const result = verdict(fetched, sent);
    let reason: ResetReason;
    if (result.kind === "notModified") {
      if (result.digest.value === state.digest.value) {
        await this.exclusive(async () => {
          // Inside the lock: the outbox as it is now, app writes made during the read included.
          const current = this.state.get(collection)!;
          const next = { ...current, etag: result.etag ?? current.etag, lastModified: result.lastModified ?? current.lastModified, private: current.private || isPrivate };
          const confirmed = this.confirmed(collection, fetched, confirming);
          // A 304 that repeats what is held changes nothing: nothing is written.
          const same = next.etag === current.etag && next.lastModified === current.lastModified && next.private === current.private;
          if (same && !confirmed.outbox) return;
          await this.commit({ ...(same ? {} : { collections: [next] }), ...confirmed }, [collection]);
        });
        return { collection, outcome: "notModified", reset: undefined };
      }
      reason = { kind: "digest-mismatch", detail: `a 304 with Delta-Digest ${result.digest.hex.slice(0, 16)}…, the records held sum to ${state.digest.hex.slice(0, 16)}…` };
    } else if (result.kind === "reset") {
      reason = result.reason;
    } else {
      try {
        await this.applyAndCommit(state, result.answer, isPrivate, () => this.confirmed(collection, fetched, confirming));
        if (result.answer.mode === "delta" && this.syncData.streaks[collection]) {
          const streaks = { ...this.syncData.streaks };
          delete streaks[collection];
          await this.exclusive(() => this.commit({ sync: { ...this.syncData, streaks } }, []));
        }
        return { collection, outcome: "updated", reset: undefined };
      } catch (error) {
        if (!(error instanceof FailedAnswer)) throw error;
        reason = error.reason;
      }
    }
    return this.resetUnlessLooping(collection, reason, credential);
  }

  /** The outbox after a pull that names the client: its writes up to `Delta-Last-Mutation` are confirmed. */
  private confirmed(collection: string, fetched: Fetched, confirming: boolean): { outbox?: OutboxData } {
    const last = Number(fetched.header("delta-last-mutation"));
    if (!confirming || !Number.isSafeInteger(last)) return {};
    const draft = new OutboxDraft(structuredClone(this.outboxData) as OutboxData);
    draft.pulled(collection, last);
    return { outbox: draft.data };
  }

  /** A conditional read of `collection`. Where `fetch` can read a redirect (Node), it asks for
   *  cacheable reads (`Delta-Redirect: 1`) and follows the `307` itself (docs/PROTOCOL.md,
   *  "Cacheable reads", "Users' cacheable reads"), presenting the two answers as one; a browser's
   *  `fetch` makes a redirect opaque, so there the read is always direct. */
  private async read(collection: string, sent: Validators | undefined, credential: string | undefined, confirming: boolean): Promise<Fetched> {
    const url = this.collectionURL(collection);
    let redirecting = sent !== undefined && this.readsRedirects;
    for (let attempt = 0; ; attempt += 1) {
      const headers: Record<string, string> = {};
      if (sent) {
        headers["If-None-Match"] = sent.etag;
        headers["If-Modified-Since"] = sent.lastModified;
      }
      if (credential) headers["Authorization"] = credential;
      if (confirming) headers["Delta-Client"] = this.outboxData.clientID;
      if (redirecting) headers["Delta-Redirect"] = "1";
      const first = await this.request(url, { method: "GET", headers, ...(redirecting ? { redirect: "manual" as const } : {}) });
      if (redirecting && first.status === 0) {
        // An opaque redirect (a Web Worker's fetch): this runtime cannot read a 307; read directly from now on.
        this.redirectsOpaque = true;
        redirecting = false;
        continue;
      }
      if (first.status !== 307 || !redirecting || !sent) return first;
      const location = first.header("location");
      const target = location === null ? undefined : new URL(location, url);
      const asked = new URL(url);
      // Only a cacheable read of the same collection is followed; any other 307 is the answer it is.
      if (!target || target.origin !== asked.origin || target.pathname !== asked.pathname || !target.searchParams.has("until")) return first;
      const second = await this.request(target.toString(), { method: "GET", headers: {}, redirect: "manual" });
      if (second.status === 307) {
        // The collection moved on in between: ask again, and after three tries without redirects.
        if (attempt >= 2) redirecting = false;
        continue;
      }
      // A user's 307 carries the user's token: kept instead of the shared answer's (which names no user).
      const forUser = first.header("etag") !== null;
      return {
        status: second.status,
        body: second.body,
        header: (name) => {
          switch (name) {
            case "etag":
            case "last-modified":
            case "cache-control":
              return forUser ? first.header(name) : second.header(name);
            case "delta-base": {
              const base = second.header(name);
              return forUser && base !== null && base === first.header(name) ? sent.etag : base;
            }
            case "delta-last-mutation":
              return first.header(name);
            default:
              return second.header(name);
          }
        },
      };
    }
  }

  /** Whether this runtime's `fetch` gives a `307`'s `Location` with `redirect: "manual"` (not a browser's). */
  private get readsRedirects(): boolean {
    if (this.redirectsOpaque || typeof (globalThis as { document?: unknown }).document !== "undefined") return false;
    return this.options.cacheableReads ?? true;
  }

  /** Applies a 200 in one commit with `confirmation`'s outbox, which is computed inside the lock:
   *  from the outbox as it is then, so an app write made meanwhile is kept. */
  private async applyAndCommit(state: CollectionState, answer: Answer, isPrivate: boolean, confirmation: () => { outbox?: OutboxData }): Promise<void> {
    await this.exclusive(async () => {
      const current = this.state.get(state.name)!;
      const applied = applyAnswer(current.records, current.digest, answer, state.name);
      const next: CollectionState = {
        ...current,
        etag: answer.etag,
        lastModified: answer.lastModified,
        digest: applied.digest,
        records: applied.records,
        private: current.private || isPrivate,
      };
      await this.commit({ collections: [next], ...confirmation() }, [state.name]);
    });
  }

  // MARK: Resetting

  private async resetUnlessLooping(collection: string, reason: ResetReason, credential: string | undefined): Promise<CollectionSync> {
    const now = Date.now();
    const streak = this.syncData.streaks[collection];
    let next = { kind: reason.kind, started: now, count: 1, last: now };
    if (streak && streak.kind === reason.kind && now - streak.last < hour) {
      if (now < streak.last + this.backoff(streak.count)) return { collection, outcome: "resetDeferred", reset: reason.kind };
      next = { kind: reason.kind, started: streak.started, count: streak.count + 1, last: now };
    }
    await this.exclusive(() => this.commit({ sync: { ...this.syncData, streaks: { ...this.syncData.streaks, [collection]: next } } }, []));
    await this.reset(collection, credential);
    return { collection, outcome: "reset", reset: reason.kind };
  }

  /** A collection at the bundled snapshot: its records (cut down to the selection when the
   *  entry was baked for another), with the entry's token when it fits. */
  private async pristine(collection: string): Promise<CollectionState> {
    const content = await this.snapshotContent();
    const entry = this.manifest.collections.find((c) => c.name === collection)!;
    const selection = this.selections.get(collection);
    const fits = snapshotFits(entry.etag, selection);
    let records = new Map<string, string>();
    for (const record of content.records.get(collection) ?? []) records.set(record.id, record.body);
    if (!fits && selection) {
      const cut = new Map<string, string>();
      for (const [id, body] of records) {
        if (selection.limit !== undefined && cut.size >= selection.limit) break;
        if (!selection.filter || matches(selection.filter, parseJSON(body) as JSONObject)) cut.set(id, body);
      }
      records = cut;
    }
    return {
      name: collection,
      etag: fits ? entry.etag : "",
      lastModified: fits ? entry.lastModified : "",
      digest: !fits && selection ? StateDigest.of(records.values()) : (content.digests.get(collection) ?? StateDigest.of(records.values())),
      installedFrom: entry.etag,
      fingerprint: selection?.fingerprint ?? fingerprint(undefined, undefined),
      private: false,
      records,
    };
  }

  /** docs/PROTOCOL.md, "What a reset does": from the snapshot's token, else the full dataset;
   *  whatever fails leaves the collection at the bundled snapshot, and fails the sync. */
  private async reset(collection: string, credential: string | undefined): Promise<void> {
    const pristine = await this.pristine(collection);
    const atSnapshot = async (): Promise<void> => {
      await this.exclusive(() => this.commit({ collections: [pristine] }, [collection]));
    };
    const attempt = async (sent: Validators | undefined): Promise<"done" | "next"> => {
      let fetched: Fetched;
      try {
        fetched = await this.read(collection, sent, credential, false);
      } catch (error) {
        await atSnapshot();
        throw error;
      }
      const isPrivate = (fetched.header("cache-control") ?? "").includes("private");
      let result;
      try {
        result = verdict(fetched, sent);
      } catch (error) {
        await atSnapshot();
        throw error;
      }
      if (result.kind === "notModified" && sent && result.digest.value === pristine.digest.value) {
        const next = { ...pristine, etag: result.etag ?? pristine.etag, lastModified: result.lastModified ?? pristine.lastModified, private: isPrivate };
        await this.exclusive(() => this.commit({ collections: [next] }, [collection]));
        return "done";
      }
      if (result.kind === "apply" && (sent || result.answer.mode === "full")) {
        try {
          const applied = applyAnswer(pristine.records, pristine.digest, result.answer, collection);
          const next: CollectionState = {
            ...pristine,
            etag: result.answer.etag,
            lastModified: result.answer.lastModified,
            digest: applied.digest,
            records: applied.records,
            private: isPrivate,
          };
          await this.exclusive(() => this.commit({ collections: [next] }, [collection]));
          return "done";
        } catch (error) {
          if (!(error instanceof FailedAnswer)) throw error;
        }
      }
      return "next";
    };
    if (pristine.etag !== "" && (await attempt({ etag: pristine.etag, lastModified: pristine.lastModified })) === "done") return;
    if ((await attempt(undefined)) === "done") return;
    await atSnapshot();
    throw new ReplicaError("unusableAnswer", "the collection was reset to the bundled snapshot, and the server's full dataset could not be applied", collection);
  }

  // MARK: - Live updates

  /** Live updates (docs/PROTOCOL.md, "Live updates"): syncs now, then holds a `HEAD …?wait=`
   *  for every collection at once and syncs again as soon as one answers other than `304`,
   *  yielding each sync's report. A failed sync waits for its back-off and goes on; a refusal
   *  that retrying cannot cure (a configuration error, a closed replica) ends it by throwing.
   *  Stop it by leaving the `for await` loop, or at once with `signal`.
   *
   *      for await (const report of replica.updates({ wait: 25 })) render(report);
   */
  async *updates(options: { wait?: number; signal?: AbortSignal } = {}): AsyncGenerator<SyncReport, void, undefined> {
    const wait = options.wait ?? 25;
    if (!Number.isInteger(wait) || wait < 1 || wait > 999_999) throw new ReplicaError("configuration", "updates: wait is a whole number of seconds from 1", String(options.wait));
    const signal = options.signal;
    let synced = false;
    while (!this.closed && !signal?.aborted) {
      if (!synced) {
        try {
          yield await this.sync();
          synced = true;
        } catch (error) {
          if (!(error instanceof ReplicaError) || !error.isTransient) throw error;
          await pause(Math.max(250, (error.retryAt?.getTime() ?? Date.now() + 1000) - Date.now()), signal);
        }
        continue;
      }
      const started = Date.now();
      const changed = await this.waitForChange(wait, signal);
      if (changed === "failed") await pause(this.backoff(Math.max(1, this.syncData.failures + 1)), signal);
      // A quiet round that came back early (a proxy or server holding less than `wait`) waits a
      // little before the next, so that nothing spins.
      else if (changed === "quiet") await pause(Math.max(0, Math.min(wait, 5) * 1000 - (Date.now() - started)), signal);
      if (changed === "changed") synced = false;
    }
  }

  /** Holds a `HEAD ?wait=` per collection; "changed" as soon as one answers other than 304. */
  private async waitForChange(wait: number, signal: AbortSignal | undefined): Promise<"changed" | "quiet" | "failed"> {
    const credential = await this.credential();
    const abort = new AbortController();
    const stop = () => abort.abort();
    signal?.addEventListener("abort", stop);
    try {
      const asks = this.collections.map(async (collection) => {
        const state = this.state.get(collection)!;
        if (state.etag === "") return "changed" as const;
        const url = this.collectionURL(collection);
        const headers: Record<string, string> = { "If-None-Match": state.etag, "If-Modified-Since": state.lastModified };
        if (credential) headers["Authorization"] = credential;
        const timer = setTimeout(() => abort.abort(), (wait + (this.options.requestTimeout ?? 60)) * 1000);
        try {
          const answer = await this.doFetch(`${url}${url.includes("?") ? "&" : "?"}wait=${wait}`, {
            method: "HEAD",
            headers,
            signal: abort.signal,
            cache: "no-store",
            credentials: "omit",
          });
          if (answer.status === 304) return "quiet" as const;
          // A change is a 200 (or a 409: the token must be reset); anything else is a failure, backed off.
          if (answer.status === 200 || answer.status === 409) return "changed" as const;
          throw new Error(`HTTP ${answer.status}`);
        } finally {
          clearTimeout(timer);
        }
      });
      // The first change decides; otherwise every ask's end (a failure among them makes it "failed").
      return await new Promise<"changed" | "quiet" | "failed">((resolve) => {
        let pending = asks.length;
        let failed = false;
        if (pending === 0) resolve("quiet");
        for (const ask of asks) {
          ask
            .then(
              (result) => {
                if (result === "changed") resolve("changed");
              },
              () => {
                failed = true;
              },
            )
            .finally(() => {
              pending -= 1;
              if (pending === 0) resolve(failed ? "failed" : "quiet");
            });
        }
      });
    } catch {
      return "failed";
    } finally {
      signal?.removeEventListener("abort", stop);
      abort.abort();
    }
  }

  // MARK: - Signing out

  /** Signs the user out: every collection whose answers were the user's goes back to the bundled
   *  snapshot, and the outbox is emptied under a new client id; public collections are kept.
   *  Refuses while writes are not settled (queued, conflicts, denied), unless `discardPendingWrites`. */
  async signOut(options: { discardPendingWrites?: boolean } = {}): Promise<void> {
    this.signingOut = true;
    try {
      await this.running?.catch(() => undefined);
      if (!options.discardPendingWrites) {
        const tally = new OutboxDraft(this.outboxData).tally();
        if (tally.queued + tally.conflicts + tally.denied > 0) {
          throw new ReplicaError(
            "configuration",
            "cannot sign out: writes are not settled; sync them, resolve them, or signOut({ discardPendingWrites: true })",
            `${tally.queued} queued, ${tally.conflicts} conflicts, ${tally.denied} denied`,
          );
        }
      }
      await this.signOutNow();
    } finally {
      this.signingOut = false;
    }
  }

  private async signOutNow(): Promise<void> {
    await this.exclusive(async () => {
      // The user's collections: those whose answers were private, and those holding a user's token (nine fields).
      const collections = await Promise.all(
        [...this.state.values()].filter((state) => state.private || tokenFields(state.etag)?.length === 9).map((state) => this.pristine(state.name)),
      );
      const touched = new Set([...collections.map((c) => c.name), ...this.outboxData.overlay.map((o) => o.collection)]);
      for (const state of collections) this.parsed.delete(state.name);
      // The next user's first sync resets these from the snapshot's token: a fresh start, not a loop.
      const streaks = { ...this.syncData.streaks };
      for (const state of collections) delete streaks[state.name];
      await this.commit({ collections, outbox: emptyOutbox(), sync: { ...this.syncData, user: null, streaks } }, touched);
      // The user's files go with their rows: every file but those a row still held references and the snapshot's.
      await this.forgetUnreferencedBlobs();
    });
    this.readOnly.clear();
  }

  /** Closes the replica and its storage. */
  async close(): Promise<void> {
    if (this.closed) return;
    await this.running?.catch(() => undefined);
    this.closed = true;
    this.subscriptions.clear();
    await this.queue.catch(() => undefined);
    await this.storage.close();
    this.updateStatus({ phase: "closed" });
  }

  // MARK: - State

  /** Runs `work` after every change before it: one change at a time. */
  private exclusive<T>(work: () => Promise<T>): Promise<T> {
    const run = this.queue.then(work, work);
    this.queue = run.catch(() => undefined);
    return run;
  }

  /** Stores the changed documents in one atomic write, then makes them the replica's state, and
   *  wakes the live queries of `touched`. With `showFirst` (the app's own writes), the live
   *  queries see the change at once, while it is being stored: a write the storage then refuses
   *  is taken back (the queries see it go) and the caller gets the error. */
  private async commit(
    change: { collections?: CollectionState[]; outbox?: OutboxData; sync?: SyncData },
    touched: Iterable<string>,
    options: { showFirst?: boolean } = {},
  ): Promise<void> {
    if (this.closed) throw new ReplicaError("closed", "the replica is closed");
    const group = new Map<string, unknown>();
    for (const state of change.collections ?? []) group.set(collectionKey(state.name), collectionDocument(state));
    if (change.outbox) group.set("outbox", change.outbox);
    if (change.sync) group.set("sync", change.sync);
    const before = { state: new Map(this.state), outbox: this.outboxData, sync: this.syncData };
    const names = [...touched];
    if (options.showFirst) this.adopt(change, names);
    try {
      await this.storage.write(group);
    } catch (error) {
      if (options.showFirst) this.adopt({ collections: [...before.state.values()], outbox: before.outbox, sync: before.sync }, names);
      if (error instanceof ReplicaError) throw error;
      throw new ReplicaError("store", "cannot write the replica's storage; nothing changed", error instanceof Error ? error.message : String(error));
    }
    if (!options.showFirst) this.adopt(change, names);
  }

  /** Makes `change` the replica's state in memory and wakes the live queries of `touched`. */
  private adopt(change: { collections?: CollectionState[]; outbox?: OutboxData; sync?: SyncData }, touched: readonly string[]): void {
    for (const state of change.collections ?? []) this.state.set(state.name, state);
    if (change.outbox) this.outboxData = change.outbox;
    if (change.sync) this.syncData = change.sync;
    if (change.outbox) {
      const tally = new OutboxDraft(this.outboxData).tally();
      this.updateStatus({ pending: tally.pending, conflicts: tally.conflicts + tally.denied });
    }
    this.notify(touched);
  }

  private updateStatus(change: Partial<ReplicaStatus>): void {
    const next = { ...this.currentStatus, ...change };
    if (change.phase === undefined && this.currentStatus.phase === "closed") next.phase = "closed";
    const tally = new OutboxDraft(this.outboxData).tally();
    next.pending = tally.pending;
    next.conflicts = tally.conflicts + tally.denied;
    const same = (Object.keys(next) as Array<keyof ReplicaStatus>).every((key) => next[key] === this.currentStatus[key]);
    this.currentStatus = next;
    if (!same) for (const watcher of this.statusWatchers) report(() => watcher(next));
  }
}

/** Runs an app's callback; what it throws is the app's error, reported as uncaught (`reportError`),
 *  never the replica operation's that woke it. */
function report(callback: () => void): void {
  try {
    callback();
  } catch (error) {
    const global = globalThis as { reportError?: (error: unknown) => void };
    if (global.reportError) global.reportError(error);
    else
      setTimeout(() => {
        throw error;
      }, 0);
  }
}

/** Waits `milliseconds`, or less when `signal` aborts. */
function pause(milliseconds: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, milliseconds);
    signal?.addEventListener("abort", done);
    function done(): void {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
  });
}

/** `AbortSignal.timeout`, which every supported runtime has and the compiler's DOM library lacks. */
function timeoutSignal(milliseconds: number): AbortSignal {
  return (AbortSignal as unknown as { timeout(milliseconds: number): AbortSignal }).timeout(milliseconds);
}

function prepare(query: QueryOptions): PreparedQuery {
  const offset = query.offset ?? 0;
  if (!Number.isInteger(offset) || offset < 0) throw new ReplicaError("configuration", "query: offset must be a whole number, 0 or more", String(query.offset));
  if (query.limit !== undefined && (!Number.isInteger(query.limit) || query.limit < 0)) {
    throw new ReplicaError("configuration", "query: limit must be a whole number, 0 or more", String(query.limit));
  }
  return {
    filter: query.filter === undefined ? undefined : parseFilter(query.filter).filter,
    order: (query.order ?? []).map((key) => (typeof key === "string" ? { member: key } : key)),
    limit: query.limit,
    offset,
  };
}

/** The `sub` claim of a JWT, read without verifying (the server verifies): who the rows are for. */
function subject(token: string): string | null {
  const part = token.split(".")[1];
  if (!part) return null;
  try {
    const json = atob(part.replace(/-/g, "+").replace(/_/g, "/").padEnd(Math.ceil(part.length / 4) * 4, "="));
    const claims = JSON.parse(new TextDecoder().decode(Uint8Array.from(json, (c) => c.charCodeAt(0)))) as { sub?: unknown };
    return typeof claims.sub === "string" ? claims.sub : null;
  } catch {
    return null;
  }
}

function problemType(fetched: Fetched): string | undefined {
  try {
    const problem = JSON.parse(new TextDecoder().decode(fetched.body)) as { type?: unknown };
    return typeof problem.type === "string" ? problem.type : undefined;
  } catch {
    return undefined;
  }
}

function lastMutationId(body: Uint8Array): number | undefined {
  try {
    const problem = JSON.parse(new TextDecoder().decode(body)) as { lastMutationId?: unknown };
    return typeof problem.lastMutationId === "number" ? problem.lastMutationId : undefined;
  } catch {
    return undefined;
  }
}

/** Reads `{"lastMutationId":N,"results":[…]}`. */
function parsePushAnswer(body: Uint8Array): PushResult[] {
  let value: JSONValue;
  try {
    value = parseJSON(new TextDecoder("utf-8", { fatal: true }).decode(body));
  } catch (error) {
    throw new ReplicaError("unusableAnswer", "the push answer is not a push answer", (error as Error).message);
  }
  const results = value instanceof JSONObject ? value.get("results") : undefined;
  if (!Array.isArray(results)) throw new ReplicaError("unusableAnswer", "the push answer is not a push answer", "no results array");
  return results.map((item) => {
    if (!(item instanceof JSONObject)) throw new ReplicaError("unusableAnswer", "the push answer is not a push answer", "a result is not an object");
    const id = item.get("id");
    const status = item.get("status");
    const text = (key: string): string | null => {
      const v = item.get(key);
      return typeof v === "string" ? v : null;
    };
    const server = item.get("server");
    if (typeof status !== "string" || !["applied", "unchanged", "conflict", "denied", "invalid"].includes(status) || !(id instanceof JSONNumber)) {
      throw new ReplicaError("unusableAnswer", "the push answer is not a push answer", "a result without id or status");
    }
    return {
      id: id.toNumber(),
      status: status as PushResult["status"],
      reason: text("reason"),
      rule: text("rule"),
      server: server instanceof JSONObject ? wireText(recordFrom(server)) : null,
      base: text("base"),
    };
  });
}

/** IndexedDB in a browser, a directory in Node, memory elsewhere. */
async function defaultStorage(name: string): Promise<ReplicaStorage> {
  if (typeof indexedDB !== "undefined") {
    const { IndexedDBStorage } = await import("./indexeddb.js");
    return IndexedDBStorage.open(name);
  }
  const runtime = globalThis as { process?: { versions?: { node?: string } } };
  if (runtime.process?.versions?.node) {
    const module = "./node.js";
    const { DirectoryStorage } = (await import(module)) as typeof import("./node.js");
    return DirectoryStorage.open(name);
  }
  return new MemoryStorage();
}
