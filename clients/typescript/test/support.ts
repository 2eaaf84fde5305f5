// What the tests share: the repository's paths, files, and real `deltasnap` processes.

import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { readFile, mkdir } from "node:fs/promises";
import { tmpdir } from "node:os";

/** The repository's root (tests run from clients/typescript/dist/test). */
export const root = new URL("../../../../", import.meta.url).pathname;

/** A file of the repository, as bytes. */
export async function repositoryFile(path: string): Promise<Uint8Array> {
  return new Uint8Array(await readFile(root + path));
}

/** A text file of the repository. */
export async function repositoryText(path: string): Promise<string> {
  return readFile(root + path, "utf8");
}

/** The deltasnap executable the Swift build made (DELTASNAP_BIN overrides). */
export function deltasnap(): string {
  if (process.env["DELTASNAP_BIN"]) return process.env["DELTASNAP_BIN"]!;
  const bin = execFileSync("swift", ["build", "--show-bin-path"], { encoding: "utf8", cwd: root }).trim();
  return `${bin}/deltasnap`;
}

let scratchCount = 0;
/** A new empty directory for one test. */
export async function scratch(name: string): Promise<string> {
  scratchCount += 1;
  const path = `${tmpdir()}/deltasnap-ts-${process.pid}-${scratchCount}-${name}`;
  await mkdir(path, { recursive: true });
  return path;
}

/** Runs deltasnap to its end; throws with its output when it fails. */
export function run(args: string[], env: Record<string, string> = {}): string {
  return execFileSync(deltasnap(), args, { encoding: "utf8", env: { ...process.env, ...env } });
}

/** A running `deltasnap serve`. */
export interface Server {
  readonly url: string;
  readonly process: ChildProcess;
  stop(): Promise<void>;
}

/** Starts `deltasnap serve` on a free port with `args`; resolves once it announces its address. */
export function serve(args: string[], env: Record<string, string> = {}): Promise<Server> {
  return new Promise((resolve, reject) => {
    const child = spawn(deltasnap(), ["serve", "--port", "0", ...args], { env: { ...process.env, ...env } });
    let output = "";
    const timer = setTimeout(() => reject(new Error(`deltasnap serve did not start: ${output}`)), 30_000);
    const look = (chunk: { toString(): string }) => {
      output += chunk.toString();
      const match = /serving .* on (http:\/\/[0-9.]+:[0-9]+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve({
          url: match[1]!,
          process: child,
          stop: () =>
            new Promise((done) => {
              if (child.exitCode !== null) return done();
              child.on("exit", () => done());
              child.kill("SIGTERM");
            }),
        });
      }
    };
    child.stdout.on("data", look);
    child.stderr.on("data", (chunk) => (output += chunk.toString()));
    child.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`deltasnap serve exited (${code}): ${output}`));
    });
  });
}
