// A browser's storage: one IndexedDB database per replica, one object store of documents; a
// group is one readwrite transaction, so a reload or a crash at any moment leaves it before or
// after (IndexedDB's transactions are atomic and durable once `complete` fires).

import { ReplicaError } from "./errors.js";
import type { ReplicaStorage } from "./storage.js";

const store = "documents";
const blobStore = "blobs";

/** A replica's storage in IndexedDB. One page (tab, worker) at a time holds a database: a
 *  second `open` while another holds it is refused (Web Locks), since two replicas writing one
 *  outbox would lose each other's writes. */
export class IndexedDBStorage implements ReplicaStorage {
  private constructor(
    private readonly database: IDBDatabase,
    private readonly release: () => void,
  ) {}

  /** Opens (creating) the database `name`; refuses when another page holds it open. */
  static async open(name: string): Promise<IndexedDBStorage> {
    let release = () => {};
    if (typeof navigator !== "undefined" && navigator.locks) {
      const held = await new Promise<boolean>((granted) => {
        void navigator.locks.request(`deltasnap:${name}`, { ifAvailable: true }, (lock) => {
          granted(lock !== null);
          // Held until close(): the callback's promise ends the lock.
          return lock === null ? undefined : new Promise<void>((done) => (release = done));
        });
      });
      if (!held) throw new ReplicaError("store", "the replica's IndexedDB database is open in another tab or worker; close that replica first", name);
    }
    try {
      const database = await IndexedDBStorage.openDatabase(name);
      return new IndexedDBStorage(database, release);
    } catch (error) {
      release();
      throw error;
    }
  }

  private static openDatabase(name: string): Promise<IDBDatabase> {
    return new Promise((resolve, reject) => {
      const request = indexedDB.open(name, 1);
      request.onupgradeneeded = () => {
        request.result.createObjectStore(store);
        request.result.createObjectStore(blobStore);
      };
      request.onsuccess = () => resolve(request.result);
      request.onerror = () => reject(new ReplicaError("store", "cannot open the replica's IndexedDB database", `${name}: ${request.error?.message ?? "unknown"}`));
      request.onblocked = () => reject(new ReplicaError("store", "the replica's IndexedDB database is held open elsewhere at an older version", name));
    });
  }

  read(key: string): Promise<unknown> {
    return new Promise((resolve, reject) => {
      const request = this.database.transaction(store, "readonly").objectStore(store).get(key);
      request.onsuccess = () => resolve(request.result === undefined ? undefined : JSON.parse(request.result as string));
      request.onerror = () => reject(new ReplicaError("store", "cannot read the replica's storage", `${key}: ${request.error?.message ?? "unknown"}`));
    });
  }

  write(group: ReadonlyMap<string, unknown>): Promise<void> {
    return new Promise((resolve, reject) => {
      // Strings, not structured clones: the same bytes as the other storages, and one value per document.
      const texts = [...group].map(([key, value]) => [key, value === undefined ? undefined : JSON.stringify(value)] as const);
      const transaction = this.database.transaction(store, "readwrite", { durability: "strict" });
      const objects = transaction.objectStore(store);
      for (const [key, text] of texts) {
        if (text === undefined) objects.delete(key);
        else objects.put(text, key);
      }
      transaction.oncomplete = () => resolve();
      const failed = () =>
        reject(new ReplicaError("store", "cannot write the replica's storage; nothing changed", transaction.error?.message ?? "the transaction was aborted"));
      transaction.onerror = failed;
      transaction.onabort = failed;
    });
  }

  async close(): Promise<void> {
    this.database.close();
    this.release();
  }

  private blobRequest<T>(mode: IDBTransactionMode, work: (objects: IDBObjectStore) => IDBRequest<T>, what: string): Promise<T> {
    return new Promise((resolve, reject) => {
      const transaction = this.database.transaction(blobStore, mode, { durability: "strict" });
      const request = work(transaction.objectStore(blobStore));
      transaction.oncomplete = () => resolve(request.result);
      transaction.onabort = transaction.onerror = () => reject(new ReplicaError("store", `cannot ${what}`, transaction.error?.message ?? "aborted"));
    });
  }

  async readBlob(sha256: string): Promise<Uint8Array | undefined> {
    const value = await this.blobRequest("readonly", (objects) => objects.get(sha256), "read a blob");
    return value === undefined ? undefined : new Uint8Array(value as ArrayBuffer);
  }

  async writeBlob(sha256: string, bytes: Uint8Array): Promise<void> {
    const copy = bytes.slice().buffer;
    await this.blobRequest("readwrite", (objects) => objects.put(copy, sha256), "keep a blob");
  }

  async deleteBlob(sha256: string): Promise<void> {
    await this.blobRequest("readwrite", (objects) => objects.delete(sha256), "forget a blob");
  }

  async blobNames(): Promise<string[]> {
    return (await this.blobRequest("readonly", (objects) => objects.getAllKeys(), "list the blobs")).map(String);
  }

  /** Deletes the database `name` (for tests and a full reset). */
  static destroy(name: string): Promise<void> {
    return new Promise((resolve, reject) => {
      const request = indexedDB.deleteDatabase(name);
      request.onsuccess = () => resolve();
      request.onerror = () => reject(new ReplicaError("store", "cannot delete the replica's IndexedDB database", name));
    });
  }
}
