// How long a live query takes to answer a local write: `put` called to the query's callback (the
// app sees its write; `put` resolves once it is stored as well), over many writes,
// in Node (Scripts/bench-typescript) and, compiled the same, in Chromium (bench/bench.html).

import { MemoryStorage, Replica, type ReplicaStorage } from "../src/index.js";

/** Percentiles of `samples` (milliseconds). */
export function percentiles(samples: number[]): { p50: number; p99: number } {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
  return { p50: at(0.5), p99: at(0.99) };
}

/** Opens a replica on `snapshot` and measures `writes` local writes answered by a live query of
 *  the 50 cheapest records, then by one of every record. */
export async function liveQuery(snapshot: ArrayBuffer | Uint8Array, storage: ReplicaStorage | undefined, name: string, writes: number): Promise<Record<string, { p50: number; p99: number }>> {
  const replica = await Replica.open({ name, snapshot, serverURL: "http://127.0.0.1:9/api", storage: storage ?? new MemoryStorage() });
  const collection = replica.collections[0]!;
  const results: Record<string, { p50: number; p99: number }> = {};
  for (const [label, query] of [
    ["50 cheapest", { order: ["price"], limit: 50 }],
    ["all, by price", { order: ["price"] }],
  ] as const) {
    let answered: ((at: number) => void) | undefined;
    let calls = 0;
    const stop = replica.observe(collection, query, () => {
      calls += 1;
      answered?.(performance.now());
    });
    const samples: number[] = [];
    // The first 20 writes warm the JIT up and are not counted.
    for (let i = -20; i < writes; i++) {
      // A record that enters the cheapest 50 each time: every write changes the result.
      const done = new Promise<number>((resolve) => (answered = resolve));
      const started = performance.now();
      await replica.put(collection, { id: `live-${label.length}-${i}`, name: "live", price: -(i + 1000) });
      // From the call to the live query's answer (the write is stored too once put returns).
      const answeredAt = await done;
      if (i >= 0) samples.push(answeredAt - started);
    }
    stop();
    if (calls !== writes + 21) throw new Error(`${label}: ${calls} callbacks for ${writes} writes`);
    results[label] = percentiles(samples);
  }
  await replica.close();
  return results;
}
