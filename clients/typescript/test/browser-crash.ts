// The IndexedDB half of the crash test (driven by test/browser.py): each load of this page first
// checks what the previous load left, which a reload interrupted at a random moment of a large
// sync (the stored records must sum to the stored digest, from one transaction), then syncs in a
// loop until the next reload. window.__check holds the verdict.

import { Replica } from "../src/index.js";
import { IndexedDBStorage } from "../src/indexeddb.js";
import { StateDigest } from "../src/digest.js";

declare global {
  interface Window {
    __check: { ok: boolean; detail: string; outcome?: string } | undefined;
  }
}

const parameters = new URLSearchParams(location.search);
const api = parameters.get("api")!;

async function main(): Promise<void> {
  // What the interrupted load left: before or after each group, never between.
  let storage = await IndexedDBStorage.open("suite-crash");
  const document = (await storage.read("collection:items")) as { digest: string; bodies: string[] } | undefined;
  await storage.close();
  if (document && StateDigest.of(document.bodies).hex !== document.digest) {
    window.__check = { ok: false, detail: `the stored records do not sum to the stored digest (${document.bodies.length} records)` };
    return;
  }
  const snapshot = await (await fetch("/fixture/crash.snapshot")).arrayBuffer();
  storage = await IndexedDBStorage.open("suite-crash");
  const replica = await Replica.open({ name: "suite-crash", snapshot, serverURL: `${api}/api`, storage });
  const first = await replica.sync({ force: true });
  const outcome = first.collections[0]!.outcome;
  // A token and records from one transaction sync cleanly: no reset.
  window.__check = { ok: outcome !== "reset", detail: `${document ? document.bodies.length : 0} records stored; first sync: ${outcome}`, outcome };
  for (;;) await replica.sync({ force: true });
}

main().catch((error) => {
  window.__check = { ok: false, detail: String(error) };
});
