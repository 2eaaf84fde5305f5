// The README's example runs as printed: demo/quickstart.mjs is the README's block, and it works
// against a server made as Scripts/serve-demo.sh makes it.

import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFile } from "node:fs/promises";
import { root, run, scratch, serve } from "./support.js";

test("README: demo/quickstart.mjs is the README's example, and it runs against the demo server", { timeout: 60_000 }, async () => {
  const readme = await readFile(`${root}clients/typescript/README.md`, "utf8");
  const block = /```js\n([\s\S]*?)```/.exec(readme)![1]!;
  const script = await readFile(`${root}clients/typescript/demo/quickstart.mjs`, "utf8");
  assert.ok(script.endsWith(block), "demo/quickstart.mjs holds the README's block, byte for byte");

  const dir = await scratch("readme");
  const db = `${dir}/demo.sqlite`;
  const id = (await readFile(`${root}Scripts/demo/database-id`, "utf8")).trim();
  run(["import", "--db", db, "--collection", "widgets", "--database-id", id, `${root}Scripts/demo/widgets.json`]);
  const server = await serve(["--db", db, "--client-writable", "widgets"], { DELTASNAP_WRITE_TOKEN: "demo-secret", DELTASNAP_CLIENT_KEY: "demo-key-123" });
  try {
    const output = execFileSync("node", [`${root}clients/typescript/demo/quickstart.mjs`], {
      encoding: "utf8",
      env: { ...process.env, DELTASNAP_API: `${server.url}/api`, REPLICA_DIR: `${dir}/replica` },
    });
    const lines = output.trim().split("\n");
    assert.match(lines[0]!, /^under 10: Widget 5 3.99, Widget 3 7.25, Widget 1 9.5$/);
    assert.match(lines[1]!, /^under 10: Widget 5 3.99, Widget 3 7.25, Widget 1 8.5$/);
    assert.equal(lines[lines.length - 1], "pushed 1 then widgets: updated");
  } finally {
    await server.stop();
  }
});
