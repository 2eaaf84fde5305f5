// The app's writes (docs/PROTOCOL.md, "Writes from apps"): local versions shown over the
// server's records, the mutations queued for `POST /push`, those the server applied that wait
// for a pull to confirm them, and the turned-down ones kept as conflicts until the app decides.
// Plain data, so that the replica stores it as one document with the rest of a change; the
// same rules as DeltaClient's outbox (Sources/DeltaClient/Store/Outbox*.swift).

/** A local version shown over the server's record. */
export interface OverlayEntry {
  collection: string;
  id: string;
  hidden: boolean;
  /** The record's canonical content. */
  body: string;
  /** The collection's ETag at which the app last saw the server's copy; null when it saw none. */
  base: string | null;
}

/** A queued write. */
export interface QueuedMutation {
  /** Queue order. */
  seq: number;
  /** The mutation id, given when first sent (from then on never changed or collapsed); null before. */
  mutation: number | null;
  collection: string;
  recordId: string;
  op: "put" | "delete";
  /** `put` only: the record's canonical content. */
  body: string | null;
  base: string | null;
  create: boolean;
}

/** A write the server applied, waiting for a pull whose `Delta-Last-Mutation` covers it. */
export interface Acknowledged {
  mutation: number;
  collection: string;
  recordId: string;
}

/** A turned-down write, kept with the local version until the app resolves or discards it. */
export interface ConflictEntry {
  collection: string;
  id: string;
  mutation: number;
  /** `changed`, `hidden`, `exists`, `unknown-base`, `denied: <rule>` or `invalid: <why>`. */
  reason: string;
  /** The server's record in wire form (`"hidden":true` first when hidden), or null. */
  server: string | null;
  /** The ETag at which `server` is current. */
  serverBase: string | null;
}

/** Everything the outbox holds: the replica's `outbox` document. */
export interface OutboxData {
  clientID: string;
  /** The last mutation id given. */
  lastMutation: number;
  /** The last queue position given. */
  lastSeq: number;
  overlay: OverlayEntry[];
  mutations: QueuedMutation[];
  acknowledged: Acknowledged[];
  conflicts: ConflictEntry[];
  /** Files attached offline, to upload before the writes that reference them. */
  uploads?: Array<{ sha256: string; size: number; type: string }>;
}

/** A new install's outbox, under a new random client id. */
export function emptyOutbox(): OutboxData {
  return { clientID: randomID(), lastMutation: 0, lastSeq: 0, overlay: [], mutations: [], acknowledged: [], conflicts: [], uploads: [] };
}

/** A random UUID (version 4), lower case. */
export function randomID(): string {
  const bytes = new Uint8Array(16);
  if (typeof crypto === "undefined") throw new Error("no WebCrypto: this package needs a browser or Node 20 or newer");
  crypto.getRandomValues(bytes);
  bytes[6] = (bytes[6]! & 0x0f) | 0x40;
  bytes[8] = (bytes[8]! & 0x3f) | 0x80;
  const hex = Array.from(bytes, (byte) => byte.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** The operations on an outbox, on a draft the caller persists. */
export class OutboxDraft {
  constructor(readonly data: OutboxData) {}

  overlayOf(collection: string, id: string): OverlayEntry | undefined {
    return this.data.overlay.find((entry) => entry.collection === collection && entry.id === id);
  }

  conflictOf(collection: string, id: string): ConflictEntry | undefined {
    return this.data.conflicts.find((entry) => entry.collection === collection && entry.id === id);
  }

  /** Shows `body` (hidden or not) as the local version; keeps the base it had, else `base`, else
   *  the collection's token `collectionETag` (null when it holds none). */
  show(collection: string, id: string, hidden: boolean, body: string, collectionETag: string, base?: string | null): void {
    const entry = this.overlayOf(collection, id);
    if (entry) {
      entry.hidden = hidden;
      entry.body = body;
      if (base !== undefined && base !== null) entry.base = base;
    } else {
      this.data.overlay.push({ collection, id, hidden, body, base: base ?? (collectionETag === "" ? null : collectionETag) });
    }
  }

  /** Queues a write of the record, collapsing into its last unsent one. */
  enqueue(op: "put" | "delete", collection: string, id: string, body: string | null, create: boolean, collectionETag: string): void {
    if (this.conflictOf(collection, id)) return; // the conflict holds the local version until it is resolved
    const previous = [...this.data.mutations].reverse().find((m) => m.collection === collection && m.recordId === id);
    if (previous && previous.mutation === null) {
      if (previous.create && op === "delete") {
        this.data.mutations = this.data.mutations.filter((m) => m !== previous);
        if (!this.hasHistory(collection, id)) this.removeOverlay(collection, id);
        return;
      }
      previous.op = op;
      previous.body = body;
      return;
    }
    const base = this.overlayOf(collection, id)?.base ?? (collectionETag === "" ? null : collectionETag);
    this.data.lastSeq += 1;
    this.data.mutations.push({ seq: this.data.lastSeq, mutation: null, collection, recordId: id, op, body, base, create });
  }

  private hasHistory(collection: string, id: string): boolean {
    return (
      this.data.mutations.some((m) => m.collection === collection && m.recordId === id) ||
      this.data.acknowledged.some((a) => a.collection === collection && a.recordId === id)
    );
  }

  removeOverlay(collection: string, id: string): void {
    this.data.overlay = this.data.overlay.filter((entry) => !(entry.collection === collection && entry.id === id));
  }

  /** Numbers the oldest unsent mutations (up to `limit` in the batch) and returns the batch to send. */
  nextBatch(limit: number): QueuedMutation[] {
    const sorted = [...this.data.mutations].sort((a, b) => a.seq - b.seq);
    for (const mutation of sorted) {
      if (sorted.filter((m) => m.mutation !== null).length >= limit) break;
      if (mutation.mutation === null) {
        this.data.lastMutation += 1;
        mutation.mutation = this.data.lastMutation;
      }
    }
    return sorted.filter((m) => m.mutation !== null).sort((a, b) => a.mutation! - b.mutation!).slice(0, limit);
  }

  /** Whether a pull of `collection` should name the client: some of its applied writes wait for confirmation. */
  awaitsConfirmation(collection: string): boolean {
    return this.data.acknowledged.some((a) => a.collection === collection);
  }

  /** After a pull of `collection` whose data includes this client's mutations up to `last`:
   *  local versions those mutations wrote give way to the server's data. */
  pulled(collection: string, last: number): void {
    const covered = new Set(this.data.acknowledged.filter((a) => a.collection === collection && a.mutation <= last).map((a) => a.recordId));
    this.data.overlay = this.data.overlay.filter((entry) => {
      if (entry.collection !== collection || !covered.has(entry.id)) return true;
      const stillQueued = this.data.mutations.some((m) => m.collection === collection && m.recordId === entry.id);
      const later = this.data.acknowledged.some((a) => a.collection === collection && a.recordId === entry.id && a.mutation > last);
      const conflicted = this.conflictOf(collection, entry.id) !== undefined;
      return stillQueued || later || conflicted;
    });
    this.data.acknowledged = this.data.acknowledged.filter((a) => !(a.collection === collection && a.mutation <= last));
  }

  /** The number of records with queued writes (not held by a conflict), queued mutations, conflicts and denied writes. */
  tally(): { pending: number; queued: number; conflicts: number; denied: number } {
    const pending = new Set(
      this.data.mutations.filter((m) => !this.conflictOf(m.collection, m.recordId)).map((m) => `${m.collection}\u0000${m.recordId}`),
    );
    return {
      pending: pending.size,
      queued: this.data.mutations.length,
      conflicts: this.data.conflicts.filter((c) => !c.reason.startsWith("denied")).length,
      denied: this.data.conflicts.filter((c) => c.reason.startsWith("denied")).length,
    };
  }

  /** Applies the server's answer to a batch: applied mutations wait for a pull to confirm them;
   *  turned-down ones become conflicts holding the local version. Returns what happened. */
  settle(results: readonly PushResult[], sent: readonly QueuedMutation[]): PushSummary {
    const summary: PushSummary = { applied: 0, unchanged: 0, conflicts: [] };
    const byID = new Map(sent.map((m) => [m.mutation!, m]));
    for (const result of results) {
      const mutation = byID.get(result.id);
      if (!mutation) continue;
      const { collection, recordId } = mutation;
      if (result.status === "applied" || result.status === "unchanged") {
        if (result.status === "applied") summary.applied += 1;
        else summary.unchanged += 1;
        // A later mutation of the same batch that applied settles an earlier one's conflict.
        this.data.conflicts = this.data.conflicts.filter((c) => !(c.collection === collection && c.id === recordId && c.mutation < result.id));
        summary.conflicts = summary.conflicts.filter((c) => !(c.collection === collection && c.id === recordId));
        continue;
      }
      const reason =
        result.status === "invalid" ? `invalid: ${result.reason ?? "unusable record"}` : result.status === "denied" ? `denied: ${result.rule ?? "write"}` : (result.reason ?? "changed");
      this.data.mutations = this.data.mutations.filter(
        (m) => m.mutation !== result.id && !(m.collection === collection && m.recordId === recordId && m.mutation === null),
      );
      this.data.conflicts = this.data.conflicts.filter((c) => !(c.collection === collection && c.id === recordId));
      this.data.conflicts.push({ collection, id: recordId, mutation: result.id, reason, server: result.server, serverBase: result.base });
      summary.conflicts = summary.conflicts.filter((c) => !(c.collection === collection && c.id === recordId));
      summary.conflicts.push({ collection, id: recordId, reason });
    }
    // What is left of the answered range was applied (or already held): it waits for a pull to confirm it.
    const first = results[0]?.id;
    const last = results[results.length - 1]?.id;
    if (first !== undefined && last !== undefined) {
      for (const m of this.data.mutations) {
        if (m.mutation !== null && m.mutation >= first && m.mutation <= last) {
          this.data.acknowledged = this.data.acknowledged.filter((a) => a.mutation !== m.mutation);
          this.data.acknowledged.push({ mutation: m.mutation, collection: m.collection, recordId: m.recordId });
        }
      }
      this.data.mutations = this.data.mutations.filter((m) => m.mutation === null || m.mutation < first || m.mutation > last);
    }
    return summary;
  }

  /** Starts the numbering again after `last`, for a server that has none of this client's
   *  mutations after it (docs/PROTOCOL.md, "Numbering again"). */
  restartNumbering(last: number, collectionETag: (collection: string) => string): void {
    const requeue = this.data.acknowledged
      .map((a) => this.overlayOf(a.collection, a.recordId))
      .filter((entry): entry is OverlayEntry => entry !== undefined)
      .filter((entry) => !this.data.mutations.some((m) => m.collection === entry.collection && m.recordId === entry.id))
      .filter((entry) => !this.conflictOf(entry.collection, entry.id));
    const unique = [...new Map(requeue.map((entry) => [`${entry.collection}\u0000${entry.id}`, entry])).values()];
    this.data.acknowledged = [];
    for (const m of this.data.mutations) m.mutation = null;
    for (const entry of unique) {
      const etag = collectionETag(entry.collection);
      entry.base = etag === "" ? null : etag;
      this.enqueue(entry.hidden ? "delete" : "put", entry.collection, entry.id, entry.hidden ? null : entry.body, false, etag);
    }
    this.data.lastMutation = last;
  }

  /** Settles a conflict: the server's version, the local one, or a merged record (its canonical body). */
  resolve(collection: string, id: string, keep: "server" | "local" | { body: string }, collectionETag: string): void {
    const conflict = this.conflictOf(collection, id);
    const local = this.overlayOf(collection, id);
    if (!conflict || !local) throw new Error(`no conflict to resolve (${collection}/${id})`);
    this.data.conflicts = this.data.conflicts.filter((c) => c !== conflict);
    if (keep === "server") {
      if (conflict.server !== null) {
        const server = splitWire(conflict.server);
        // The app now sees the server's copy until a pull that includes the turned-down mutation's answer.
        this.show(collection, id, server.hidden, server.body, collectionETag, conflict.serverBase);
        this.data.acknowledged.push({ mutation: conflict.mutation, collection, recordId: id });
      } else {
        this.removeOverlay(collection, id);
      }
      return;
    }
    let hidden = local.hidden;
    let body = local.body;
    if (typeof keep === "object") {
      hidden = false;
      body = keep.body;
    }
    // Sent, and later edited, on top of the server's copy the conflict showed.
    this.show(collection, id, hidden, body, collectionETag, conflict.serverBase);
    this.enqueue(hidden ? "delete" : "put", collection, id, hidden ? null : body, false, collectionETag);
  }
}

/** One mutation's answer from `POST /push`. */
export interface PushResult {
  id: number;
  status: "applied" | "unchanged" | "conflict" | "denied" | "invalid";
  reason: string | null;
  rule: string | null;
  /** The server's record in wire form, or null. */
  server: string | null;
  base: string | null;
}

/** What a push did. */
export interface PushSummary {
  applied: number;
  unchanged: number;
  conflicts: Array<{ collection: string; id: string; reason: string }>;
}

/** A wire record's hidden state and canonical content. */
export function splitWire(wire: string): { hidden: boolean; body: string } {
  if (wire.startsWith('{"hidden":true,')) return { hidden: true, body: "{" + wire.slice('{"hidden":true,'.length) };
  if (wire === '{"hidden":true}') return { hidden: true, body: "{}" };
  return { hidden: false, body: wire };
}
