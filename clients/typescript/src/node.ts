// Node's storage: a directory of JSON documents, written in atomic groups with a journal, so that
// a SIGKILL or a power loss at any moment leaves every group before or after, never between.
// Imported as `@deltasnap/client/node`; browsers never load it.

import { closeSync, fsyncSync, openSync } from "node:fs";
import { mkdir, open, readFile, readdir, rename, unlink } from "node:fs/promises";
import { ReplicaError } from "./errors.js";
import type { ReplicaStorage } from "./storage.js";


const journal = "journal.json";

/** A replica's storage in a directory: one file per document (`<key>.json`), replaced by
 *  rename. A group is written as `.new` files, then committed by one rename of the journal
 *  that names them, then renamed into place; opening finishes a committed group and drops an
 *  uncommitted one. One process at a time may use a directory. */
export class DirectoryStorage implements ReplicaStorage {
  private constructor(private readonly directory: string) {}

  /** Opens (creating) the directory and completes or drops a group a crash interrupted. Refuses
   *  while another live process holds it (its `lock` file names the process); a lock left by a
   *  process that died is taken over. */
  static async open(directory: string): Promise<DirectoryStorage> {
    try {
      await mkdir(directory, { recursive: true });
      await DirectoryStorage.lock(directory);
    } catch (error) {
      if (error instanceof ReplicaError) throw error;
      throw new ReplicaError("store", "cannot open the replica's directory", `${directory}: ${(error as Error).message}`);
    }
    const storage = new DirectoryStorage(directory);
    try {
      await storage.recover();
      return storage;
    } catch (error) {
      await storage.close();
      throw new ReplicaError("store", "cannot open the replica's directory", `${directory}: ${(error as Error).message}`);
    }
  }

  /** The directories this process holds open. */
  private static readonly held = new Set<string>();

  private static async lock(directory: string): Promise<void> {
    const path = `${directory}/lock`;
    const key = directory.replace(/\/+$/, "");
    if (DirectoryStorage.held.has(key)) {
      throw new ReplicaError("store", "the replica's directory is open already in this process; close that replica first", directory);
    }
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        const handle = await open(path, "wx");
        await handle.writeFile(String(process.pid), "utf8");
        await handle.close();
        DirectoryStorage.held.add(key);
        return;
      } catch (error) {
        if ((error as { code?: string }).code !== "EEXIST") throw error;
      }
      const holder = Number((await readFile(path, "utf8").catch(() => "")).trim());
      if (Number.isInteger(holder) && holder > 0 && holder !== process.pid && alive(holder)) {
        throw new ReplicaError("store", "the replica's directory is open in another process; close that replica first", `${directory} (process ${holder})`);
      }
      // Left by a process that ended (or by this one, not closed): taken over.
      await unlink(path).catch(ignoreMissing);
    }
    throw new ReplicaError("store", "cannot take the replica's directory lock", path);
  }

  private file(key: string): string {
    return `${this.directory}/${encodeURIComponent(key)}.json`;
  }

  async read(key: string): Promise<unknown> {
    let text: string;
    try {
      text = await readFile(this.file(key), "utf8");
    } catch (error) {
      if ((error as { code?: string }).code === "ENOENT") return undefined;
      throw new ReplicaError("store", "cannot read the replica's storage", `${this.file(key)}: ${(error as Error).message}`);
    }
    try {
      return JSON.parse(text);
    } catch {
      throw new ReplicaError("store", "the replica's storage holds a damaged document", this.file(key));
    }
  }

  async write(group: ReadonlyMap<string, unknown>): Promise<void> {
    if (this.broken !== undefined) throw new ReplicaError("store", "an earlier change is stored but not in place: close and open the replica again", this.broken);
    const entries: Array<{ file: string; remove: boolean }> = [];
    try {
      for (const [key, value] of group) {
        const file = this.file(key);
        if (value === undefined) {
          entries.push({ file, remove: true });
          continue;
        }
        await writeDurably(`${file}.new`, JSON.stringify(value));
        entries.push({ file, remove: false });
      }
      // The commit point: the journal names the group; once it is in place, the group happens.
      await writeDurably(`${this.directory}/${journal}.new`, JSON.stringify(entries));
      await rename(`${this.directory}/${journal}.new`, `${this.directory}/${journal}`);
      syncDirectory(this.directory);
    } catch (error) {
      await this.dropUncommitted();
      throw new ReplicaError("store", "cannot write the replica's storage; nothing changed", (error as Error).message);
    }
    try {
      await this.apply(entries);
    } catch (error) {
      // The group is committed (its journal is in place): the next open puts it in place.
      this.broken = (error as Error).message;
      throw new ReplicaError("store", "the change is stored, but not yet in place: close and open the replica again", this.broken);
    }
  }

  private async apply(entries: ReadonlyArray<{ file: string; remove: boolean }>): Promise<void> {
    for (const entry of entries) {
      if (entry.remove) await unlink(entry.file).catch(ignoreMissing);
      else await rename(`${entry.file}.new`, entry.file).catch(ignoreMissing);
    }
    syncDirectory(this.directory);
    await unlink(`${this.directory}/${journal}`);
    syncDirectory(this.directory);
  }

  private async recover(): Promise<void> {
    let committed: Array<{ file: string; remove: boolean }> | undefined;
    try {
      committed = JSON.parse(await readFile(`${this.directory}/${journal}`, "utf8"));
    } catch (error) {
      if ((error as { code?: string }).code !== "ENOENT") throw error;
    }
    if (committed) await this.apply(committed);
    await this.dropUncommitted();
  }

  private async dropUncommitted(): Promise<void> {
    for (const name of await readdir(this.directory)) {
      if (name.endsWith(".new")) await unlink(`${this.directory}/${name}`).catch(ignoreMissing);
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    DirectoryStorage.held.delete(this.directory.replace(/\/+$/, ""));
    await unlink(`${this.directory}/lock`).catch(() => undefined);
  }

  private closed = false;
  /** Set when a committed group could not be put in place: the next open completes it; until then no write. */
  private broken: string | undefined;

  private blobFile(sha256: string): string {
    if (!/^[0-9a-f]{64}$/.test(sha256)) throw new ReplicaError("configuration", "not a blob name (64 lowercase hex digits)", sha256);
    return `${this.directory}/blobs/${sha256}`;
  }

  async readBlob(sha256: string): Promise<Uint8Array | undefined> {
    try {
      return new Uint8Array(await readFile(this.blobFile(sha256)));
    } catch (error) {
      if ((error as { code?: string }).code === "ENOENT") return undefined;
      throw new ReplicaError("store", "cannot read a blob", `${sha256}: ${(error as Error).message}`);
    }
  }

  async writeBlob(sha256: string, bytes: Uint8Array): Promise<void> {
    const file = this.blobFile(sha256);
    try {
      await mkdir(`${this.directory}/blobs`, { recursive: true });
      const handle = await open(`${file}.partial`, "w");
      try {
        await handle.writeFile(bytes);
        await handle.sync();
      } finally {
        await handle.close();
      }
      await rename(`${file}.partial`, file);
      syncDirectory(`${this.directory}/blobs`);
    } catch (error) {
      await unlink(`${file}.partial`).catch(() => undefined);
      throw new ReplicaError("store", "cannot keep a blob", `${sha256}: ${(error as Error).message}`);
    }
  }

  async deleteBlob(sha256: string): Promise<void> {
    await unlink(this.blobFile(sha256)).catch(ignoreMissing);
  }

  async blobNames(): Promise<string[]> {
    try {
      return (await readdir(`${this.directory}/blobs`)).filter((name) => /^[0-9a-f]{64}$/.test(name));
    } catch (error) {
      if ((error as { code?: string }).code === "ENOENT") return [];
      throw error;
    }
  }
}

async function writeDurably(path: string, text: string): Promise<void> {
  const handle = await open(path, "w");
  try {
    await handle.writeFile(text, "utf8");
    await handle.sync();
  } finally {
    await handle.close();
  }
}

function syncDirectory(directory: string): void {
  const descriptor = openSync(directory, "r");
  try {
    fsyncSync(descriptor);
  } finally {
    closeSync(descriptor);
  }
}

/** Whether process `pid` is alive (signal 0 checks without sending anything). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as { code?: string }).code === "EPERM";
  }
}

function ignoreMissing(error: unknown): void {
  if ((error as { code?: string }).code !== "ENOENT") throw error;
}
