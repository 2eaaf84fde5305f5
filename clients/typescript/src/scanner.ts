// A fast proof that a line is a visible record in canonical form, without building a JSON tree:
// what a snapshot's record lines almost always are. It only ever accepts a line the full parser
// (json.ts) reads to the same canonical text and id; anything it is unsure of (an escape it does
// not need to judge, a hidden record, a blob reference) it leaves to the full parser, which
// accepts it or says what is wrong. test/scanner.test.ts holds the two to that, at random.

import { compareCodePoints, limits, parseNumberText, utf8Length } from "./json.js";

/** The id of the visible canonical record `line` is, or undefined: read it with the full parser. */
export function scanCanonicalRecord(line: string): string | undefined {
  const scanner = new Scanner(line);
  if (line.charCodeAt(0) !== 0x7b) return undefined;
  if (!scanner.object(1, true)) return undefined;
  if (scanner.i !== line.length || scanner.id === undefined) return undefined;
  return scanner.id;
}

class Scanner {
  i = 0;
  id: string | undefined;
  constructor(private readonly s: string) {}

  value(depth: number): boolean {
    const c = this.s.charCodeAt(this.i);
    if (c === 0x7b) return this.object(depth, false);
    if (c === 0x5b) return this.array(depth);
    if (c === 0x22) return this.string() !== undefined;
    if (c === 0x74) return this.literal("true");
    if (c === 0x66) return this.literal("false");
    if (c === 0x6e) return this.literal("null");
    return this.number();
  }

  object(depth: number, top: boolean): boolean {
    if (depth > limits.depth) return false;
    this.i++;
    if (this.s.charCodeAt(this.i) === 0x7d) {
      this.i++;
      return true;
    }
    let previous: string | undefined;
    for (;;) {
      if (this.s.charCodeAt(this.i) !== 0x22) return false;
      const key = this.string();
      if (key === undefined) return false;
      // Strictly increasing by code points (keys with escapes are left to the full parser).
      if (previous !== undefined && compareCodePoints(previous, key) >= 0) return false;
      previous = key;
      if (this.s.charCodeAt(this.i) !== 0x3a) return false;
      this.i++;
      if (top && key === "hidden") return false;
      if (top && key === "id") {
        const start = this.i;
        if (this.s.charCodeAt(this.i) !== 0x22) return false;
        const id = this.string();
        if (id === undefined || id.length === 0 || this.i - start - 2 !== id.length) return false;
        if (utf8Length(id) > limits.idBytes) return false;
        this.id = id;
      } else if (!this.value(depth + 1)) {
        return false;
      }
      const next = this.s.charCodeAt(this.i++);
      if (next === 0x7d) return true;
      if (next !== 0x2c) return false;
    }
  }

  array(depth: number): boolean {
    if (depth > limits.depth) return false;
    this.i++;
    if (this.s.charCodeAt(this.i) === 0x5d) {
      this.i++;
      return true;
    }
    for (;;) {
      if (!this.value(depth + 1)) return false;
      const next = this.s.charCodeAt(this.i++);
      if (next === 0x5d) return true;
      if (next !== 0x2c) return false;
    }
  }

  /** A string with no escape at all (anything else is the full parser's); its content. */
  string(): string | undefined {
    const start = ++this.i;
    const s = this.s;
    for (let j = start; j < s.length; j++) {
      const c = s.charCodeAt(j);
      if (c === 0x22) {
        this.i = j + 1;
        if (j - start > limits.stringBytes / 3 && utf8Length(s.slice(start, j)) > limits.stringBytes) return undefined;
        return s.slice(start, j);
      }
      if (c === 0x5c || c < 0x20) return undefined;
    }
    return undefined;
  }

  literal(word: string): boolean {
    if (!this.s.startsWith(word, this.i)) return false;
    this.i += word.length;
    return true;
  }

  number(): boolean {
    const match = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:e[+-][0-9]+)?/y;
    match.lastIndex = this.i;
    const found = match.exec(this.s);
    if (!found || found[0].length === 0) return false;
    const text = found[0];
    // Canonical exactly when its canonical spelling is itself (limits included).
    if (parseNumberText(text) !== text) return false;
    this.i += text.length;
    return true;
  }
}
