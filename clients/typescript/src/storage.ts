// Where a replica keeps its state: a few named documents, written together atomically. One
// small interface, so that browsers (IndexedDB), Node (a directory) and tests (memory) keep
// the same guarantee, and a React Native app can plug in its own.

/** A replica's storage: named JSON documents, written in atomic groups.
 *
 *  The contract a storage keeps:
 *  - `write` is all or nothing: after a crash, a reload or a kill at any moment, `read` returns
 *    every document of a group as it was before the group or as it is after it, never a mix;
 *  - `write` resolves only once the group is durable (it survives a power loss where the
 *    platform allows: fsync, an IndexedDB transaction's `complete`);
 *  - documents are plain JSON values (objects, arrays, strings, finite numbers, booleans, null),
 *    returned as equal values, not necessarily the same objects. */
export interface ReplicaStorage {
  /** The document `key`, or undefined when there is none. */
  read(key: string): Promise<unknown>;
  /** Writes every document of `group` in one atomic step: a value replaces the document, `undefined` deletes it. */
  write(group: ReadonlyMap<string, unknown>): Promise<void>;
  /** Releases what the storage holds open. */
  close(): Promise<void>;
  /** The bytes of the blob named `sha256` (64 lowercase hex digits), or undefined. */
  readBlob(sha256: string): Promise<Uint8Array | undefined>;
  /** Keeps a blob's bytes under its name; whole or not at all (the replica checked the hash). */
  writeBlob(sha256: string, bytes: Uint8Array): Promise<void>;
  /** Forgets a blob (nothing when it has none). */
  deleteBlob(sha256: string): Promise<void>;
  /** The names of the blobs it keeps. */
  blobNames(): Promise<string[]>;
}

/** Storage in memory, for tests and for pages that need nothing to survive a reload. */
export class MemoryStorage implements ReplicaStorage {
  private readonly documents = new Map<string, string>();

  async read(key: string): Promise<unknown> {
    const text = this.documents.get(key);
    return text === undefined ? undefined : JSON.parse(text);
  }

  async write(group: ReadonlyMap<string, unknown>): Promise<void> {
    // Serialized first: a value that cannot be stored fails the whole group before any of it lands.
    const texts = new Map<string, string | undefined>();
    for (const [key, value] of group) texts.set(key, value === undefined ? undefined : JSON.stringify(value));
    for (const [key, text] of texts) {
      if (text === undefined) this.documents.delete(key);
      else this.documents.set(key, text);
    }
  }

  async close(): Promise<void> {}

  private readonly blobs = new Map<string, Uint8Array>();

  async readBlob(sha256: string): Promise<Uint8Array | undefined> {
    const bytes = this.blobs.get(sha256);
    return bytes && bytes.slice();
  }

  async writeBlob(sha256: string, bytes: Uint8Array): Promise<void> {
    this.blobs.set(sha256, bytes.slice());
  }

  async deleteBlob(sha256: string): Promise<void> {
    this.blobs.delete(sha256);
  }

  async blobNames(): Promise<string[]> {
    return [...this.blobs.keys()];
  }
}
