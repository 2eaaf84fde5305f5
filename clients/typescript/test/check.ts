// Assertions that run in Node and in a browser alike (node:assert is Node's only).

/** Fails with `message`. */
export function fail(message: string): never {
  throw new Error(message);
}

/** Fails unless `value` is truthy. */
export function check(value: unknown, message: string): asserts value {
  if (!value) fail(message);
}

/** Fails unless the two are equal as JSON. */
export function same(actual: unknown, expected: unknown, message: string): void {
  const a = JSON.stringify(actual);
  const b = JSON.stringify(expected);
  if (a !== b) fail(`${message}: got ${a}, expected ${b}`);
}

/** Fails unless `work` throws (or rejects); returns the error. */
export async function refused(work: () => unknown, message: string): Promise<unknown> {
  try {
    await work();
  } catch (error) {
    return error;
  }
  return fail(`${message}: no error`);
}

/** A small seeded generator (mulberry32): randomized tests print their seed and replay it. */
export function seeded(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
