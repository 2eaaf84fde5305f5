// The snapshot's fast line scanner never accepts what the full parser would not read to the same
// canonical record: random lines, canonical and not, through both. The seed is printed;
// DELTASNAP_SEED replays it.

import { test } from "node:test";
import assert from "node:assert/strict";
import { seeded } from "./check.js";
import { canonical, parseJSON, parseRecord, wireText } from "../src/json.js";
import { scanCanonicalRecord } from "../src/scanner.js";


test("the scanner accepts only lines the full parser reads to the same canonical, visible record", () => {
  const seed = Number(process.env["DELTASNAP_SEED"] ?? Math.floor(Math.random() * 1_000_000));
  console.log(`scanner.test: seed ${seed} (DELTASNAP_SEED=${seed} replays it)`);
  const next = seeded(seed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!;
  const strings = ["", "a", "é", "😀", "\u007f", "\u2028", "x\"y", "back\\slash", "tab\there", "nul\u0000", "\u001f", "ｱ", "é", "hidden", "id", "$blob", "/"];
  const numbers = ["0", "-0", "1", "1.0", "1e0", "10", "1e21", "1e+21", "1E+21", "0.000001", "1e-7", "1.5e-7", "123e18", "-1.50", "1e100000", "1e100001", "0.1e-100000", "007", "1.", ".5", "2.50", "12345678901234567890123"];
  const text = (): string => {
    const value = pick(strings);
    return next() < 0.2 ? JSON.stringify(value).replace(/[a-z]/, (c) => `\\u00${c.charCodeAt(0).toString(16)}`) : JSON.stringify(value);
  };
  const value = (depth: number): string => {
    const roll = next();
    if (depth > 3 || roll < 0.3) return pick(numbers);
    if (roll < 0.5) return text();
    if (roll < 0.6) return pick(["true", "false", "null", "nul"]);
    if (roll < 0.8) return `[${Array.from({ length: Math.floor(next() * 3) }, () => value(depth + 1)).join(",")}]`;
    return object(depth + 1, false);
  };
  const object = (depth: number, top: boolean): string => {
    const keys = Array.from({ length: Math.floor(next() * 4) }, () => pick(["a", "b", "B", "é", "😀", "ｱ", "hidden", "id", "aa", "$blob", "z"]));
    if (top && next() < 0.9) keys.push("id");
    if (next() < 0.7) keys.sort();
    const members = keys.map((key) => `${JSON.stringify(key)}:${key === "id" && top ? text() : value(depth)}`);
    const glue = next() < 0.1 ? ", " : ",";
    return `{${members.join(glue)}}`;
  };
  let accepted = 0;
  for (let i = 0; i < 20_000; i++) {
    let line = object(1, true);
    if (next() < 0.5) {
      // Half of them made canonical first, so that the scanner has plenty to accept.
      try {
        line = canonical(parseJSON(line));
      } catch {
        // not JSON: kept as it is
      }
    }
    const scanned = scanCanonicalRecord(line);
    if (scanned === undefined) continue;
    accepted += 1;
    let record;
    try {
      record = parseRecord(line);
    } catch (error) {
      assert.fail(`seed ${seed}: the scanner accepted ${JSON.stringify(line)}, the parser refuses it (${(error as Error).message})`);
    }
    assert.equal(record.hidden, false, `seed ${seed}: ${line}`);
    assert.equal(wireText(record), line, `seed ${seed}: accepted a line that is not canonical`);
    assert.equal(record.id, scanned, `seed ${seed}: ${line}`);
  }
  assert.ok(accepted > 2_000, `the scanner proves most canonical lines (${accepted} of 20,000)`);
});
