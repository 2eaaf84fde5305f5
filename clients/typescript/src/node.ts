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

  /** Opens (creating) the directory and completes or drops a group a crash interrupted. */
  static async open(directory: string): Promise<DirectoryStorage> {
    try {
      await mkdir(directory, { recursive: true });
      const storage = new DirectoryStorage(directory);
      await storage.recover();
      return storage;
    } catch (error) {
      throw new ReplicaError("store", "cannot open the replica's directory", `${directory}: ${(error as Error).message}`);
    }
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
    await this.apply(entries);
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

  async close(): Promise<void> {}

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

function ignoreMissing(error: unknown): void {
  if ((error as { code?: string }).code !== "ENOENT") throw error;
}
