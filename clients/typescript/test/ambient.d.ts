// The few Node APIs the tests use (Debian ships no @types/node).
declare module "node:test" {
  export function test(name: string, body: () => unknown | Promise<unknown>): Promise<void>;
  export function test(name: string, options: { timeout?: number; skip?: boolean | string }, body: () => unknown | Promise<unknown>): Promise<void>;
  export function describe(name: string, body: () => unknown): void;
  export function before(body: () => unknown | Promise<unknown>, options?: { timeout?: number }): void;
  export function after(body: () => unknown | Promise<unknown>): void;
}
declare module "node:assert/strict" {
  interface Assert {
    (value: unknown, message?: string): asserts value;
    equal<T>(actual: unknown, expected: T, message?: string): asserts actual is T;
    notEqual(actual: unknown, expected: unknown, message?: string): void;
    deepEqual<T>(actual: unknown, expected: T, message?: string): asserts actual is T;
    ok(value: unknown, message?: string): asserts value;
    throws(block: () => unknown, matcher?: RegExp | ((error: unknown) => boolean), message?: string): void;
    rejects(block: Promise<unknown> | (() => Promise<unknown>), matcher?: RegExp | ((error: unknown) => boolean) | object, message?: string): Promise<void>;
    match(value: string, pattern: RegExp, message?: string): void;
    fail(message?: string): never;
  }
  const assert: Assert;
  export default assert;
}
declare module "node:child_process" {
  interface Readable {
    on(event: "data", listener: (chunk: { toString(): string }) => void): void;
  }
  interface ChildProcess {
    readonly pid: number | undefined;
    readonly stdout: Readable;
    readonly stderr: Readable;
    kill(signal?: string): boolean;
    on(event: "exit", listener: (code: number | null, signal: string | null) => void): void;
    readonly exitCode: number | null;
  }
  function spawn(command: string, args: string[], options?: { stdio?: unknown; env?: Record<string, string | undefined>; cwd?: string }): ChildProcess;
  function execFileSync(command: string, args: string[], options?: { encoding?: "utf8"; cwd?: string; env?: Record<string, string | undefined> }): string;
}
declare module "node:os" {
  function tmpdir(): string;
}
