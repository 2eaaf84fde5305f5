// The conformance vectors of docs/conformance/, in Node (browser-suite.ts runs them in Chromium).

import { test } from "node:test";
import { conformanceChecks } from "./conformance-checks.js";
import { repositoryFile, repositoryText } from "./support.js";

for (const [name, run] of conformanceChecks) {
  test(name, async () => {
    await run({ bytes: repositoryFile, text: repositoryText });
  });
}
