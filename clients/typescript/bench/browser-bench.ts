// Scripts/bench-typescript in Chromium: install a snapshot and apply a delta on IndexedDB, and
// the live query, timed in the page; results in window.__bench.
//   bench.html?install=<API at the snapshot's state>&delta=<API with the change>&snapshot=<URL>&live=<URL>&runs=N&writes=N

import { Replica } from "../src/index.js";
import { IndexedDBStorage } from "../src/indexeddb.js";
import { liveQuery } from "./live.js";

declare global {
  interface Window {
    __bench: unknown;
  }
}

const parameters = new URLSearchParams(location.search);
const runs = Number(parameters.get("runs") ?? 3);
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

async function main(): Promise<void> {
  const snapshot = await (await fetch(parameters.get("snapshot")!)).arrayBuffer();
  const install: number[] = [];
  const delta: number[] = [];
  for (let run = 0; run < runs; run++) {
    await IndexedDBStorage.destroy("bench-install");
    let started = performance.now();
    const fresh = await Replica.open({ name: "bench-install", snapshot, serverURL: `${parameters.get("install")}/api` });
    const first = await fresh.sync();
    install.push(performance.now() - started);
    if (first.collections[0]!.outcome !== "notModified") throw new Error(`install: ${JSON.stringify(first)}`);
    await fresh.close();

    await IndexedDBStorage.destroy("bench-delta");
    const pristine = await Replica.open({ name: "bench-delta", snapshot, serverURL: `${parameters.get("delta")}/api` });
    started = performance.now();
    const report = await pristine.sync();
    delta.push(performance.now() - started);
    if (report.collections[0]!.outcome !== "updated") throw new Error(`delta: ${JSON.stringify(report)}`);
    await pristine.close();
  }
  const liveSnapshot = await (await fetch(parameters.get("live")!)).arrayBuffer();
  await IndexedDBStorage.destroy("bench-live");
  const live = await liveQuery(liveSnapshot, await IndexedDBStorage.open("bench-live"), "bench-live", Number(parameters.get("writes") ?? 200));
  window.__bench = { install: median(install) / 1000, delta: median(delta) / 1000, live };
  document.getElementById("out")!.textContent = JSON.stringify(window.__bench, null, 2);
}

main().catch((error) => {
  window.__bench = { error: String(error) };
});
