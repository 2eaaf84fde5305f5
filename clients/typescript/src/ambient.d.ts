// Declarations the TypeScript compiler Debian ships (4.8) lacks, for APIs every runtime this
// package supports has: the Compression Streams standard (Chromium 80+, Firefox 113+, Safari
// 16.4+, Node 18+). Kept to what the package uses.
declare class DecompressionStream {
  constructor(format: "gzip" | "deflate" | "deflate-raw");
  readonly readable: ReadableStream<Uint8Array>;
  readonly writable: WritableStream<BufferSource>;
}

// The few Node APIs `node.ts` uses (Debian ships no @types/node); only loaded in Node.
declare module "node:fs/promises" {
  interface FileHandle {
    writeFile(data: string, encoding: "utf8"): Promise<void>;
    writeFile(data: Uint8Array): Promise<void>;
    sync(): Promise<void>;
    close(): Promise<void>;
  }
  function open(path: string, flags: string): Promise<FileHandle>;
  function readFile(path: string, encoding: "utf8"): Promise<string>;
  function readFile(path: string): Promise<Uint8Array>;
  function writeFile(path: string, data: string | Uint8Array): Promise<void>;
  function readdir(path: string): Promise<string[]>;
  function mkdir(path: string, options: { recursive: boolean }): Promise<string | undefined>;
  function rename(from: string, to: string): Promise<void>;
  function unlink(path: string): Promise<void>;
  function rm(path: string, options: { recursive: boolean; force: boolean }): Promise<void>;
}
declare module "node:fs" {
  function openSync(path: string, flags: string): number;
  function fsyncSync(descriptor: number): void;
  function closeSync(descriptor: number): void;
}


// Node's process, as node.ts and the tests use it (only touched where Node runs).
declare var process: {
  env: Record<string, string | undefined>;
  argv: string[];
  pid: number;
  versions: { node?: string };
  exit(code?: number): never;
  kill(pid: number, signal: string | number): void;
};
