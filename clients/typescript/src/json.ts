// The wire's JSON (docs/PROTOCOL.md, "Records"): a strict RFC 8259 parser that keeps every
// number's exact decimal value, the limits every record is held to, and the canonical form the
// server stores, sends and hashes. JavaScript's JSON.parse loses digits past a double and
// JSON.stringify writes \b, \f and UTF-16 key order, so neither is used for wire bytes.

import { ReplicaError } from "./errors.js";

/** A JSON number, kept as its exact decimal value (never a binary double). */
export class JSONNumber {
  /** The canonical text (docs/PROTOCOL.md, "Numbers"). */
  readonly text: string;
  /** -1, 0 or 1. */
  readonly sign: number;
  /** The significant digits, without leading or trailing zeros ("" for zero). */
  readonly digits: string;
  /** The value is 0.digits × 10^point. */
  readonly point: number;

  constructor(sign: number, digits: string, point: number) {
    this.sign = digits === "" ? 0 : sign;
    this.digits = digits;
    this.point = digits === "" ? 0 : point;
    this.text = layout(this.sign, digits, this.point);
  }

  /** The canonical exponent: the one the canonical text shows (0 in plain notation). */
  get canonicalExponent(): number {
    const n = this.point;
    if (this.digits === "") return 0;
    if ((this.digits.length <= n && n <= 21) || (0 < n && n <= 21) || (-6 < n && n <= 0)) return 0;
    return n - 1;
  }

  /** The nearest double, for the app's objects. */
  toNumber(): number {
    return Number(this.text);
  }

  /** The exact number of a JavaScript number (finite only): its shortest round-trip spelling. */
  static of(value: number): JSONNumber {
    if (!Number.isFinite(value)) throw new ReplicaError("invalidRecord", `record: ${value} is not a JSON number`);
    return parseNumber(String(value), "/")!;
  }

  /** -1, 0 or 1: the exact order of two numbers. */
  compare(other: JSONNumber): number {
    if (this.sign !== other.sign) return this.sign < other.sign ? -1 : 1;
    if (this.sign === 0) return 0;
    let magnitude: number;
    if (this.point !== other.point) magnitude = this.point < other.point ? -1 : 1;
    else magnitude = this.digits < other.digits ? -1 : this.digits > other.digits ? 1 : 0;
    return this.sign * magnitude;
  }
}

/** An object, its members sorted by the UTF-8 bytes of their keys. */
export class JSONObject {
  readonly members: ReadonlyArray<readonly [string, JSONValue]>;
  constructor(members: Array<readonly [string, JSONValue]>) {
    // Canonical input arrives sorted: checked in one pass, sorted only when it is not.
    let sorted = true;
    for (let i = 1; i < members.length && sorted; i++) sorted = compareCodePoints(members[i - 1]![0], members[i]![0]) < 0;
    this.members = sorted ? members : members.sort((a, b) => compareCodePoints(a[0], b[0]));
  }
  /** The member `key`, or undefined. */
  get(key: string): JSONValue | undefined {
    for (const [k, v] of this.members) if (k === key) return v;
    return undefined;
  }
}

/** A JSON value as the wire holds it. */
export type JSONValue = null | boolean | string | JSONNumber | JSONValue[] | JSONObject;

/** The limits of docs/PROTOCOL.md, "Limits". */
export const limits = {
  idBytes: 512,
  stringBytes: 1 << 20,
  numberBytes: 1024,
  exponent: 100_000,
  depth: 64,
} as const;

/** Compares two strings by Unicode code points: the order of their UTF-8 bytes. */
export function compareCodePoints(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    // A surrogate (U+D800–DFFF) stands for a code point above U+FFFF: after every BMP character.
    const xs = x >= 0xd800 && x <= 0xdfff;
    const ys = y >= 0xd800 && y <= 0xdfff;
    if (xs !== ys) return xs ? 1 : -1;
    return x < y ? -1 : 1;
  }
  return a.length === b.length ? 0 : a.length < b.length ? -1 : 1;
}

/** The number of UTF-8 bytes of a well-formed string. */
export function utf8Length(text: string): number {
  let bytes = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) bytes += 1;
    else if (c < 0x800) bytes += 2;
    else if (c >= 0xd800 && c <= 0xdbff) {
      bytes += 4;
      i++;
    } else bytes += 3;
  }
  return bytes;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** UTF-8 bytes of `text`. */
export function utf8(text: string): Uint8Array {
  return encoder.encode(text);
}

/** `bytes` as text, refusing invalid UTF-8. */
export function fromUTF8(bytes: Uint8Array, what: string): string {
  try {
    return decoder.decode(bytes);
  } catch {
    throw new ReplicaError("invalidRecord", `${what}: JSON: invalid UTF-8`);
  }
}

// MARK: - Parsing

class Parser {
  private i = 0;
  constructor(private readonly s: string) {}

  fail(why: string, at = this.i): never {
    throw new ReplicaError("invalidRecord", `JSON: ${why} (at character ${at})`);
  }

  /** One value; `depth` is the level of the value itself (1: a record). */
  document(depth = 1): JSONValue {
    this.space();
    const value = this.value(depth, "");
    this.space();
    if (this.i !== this.s.length) this.fail("unexpected data after the value");
    return value;
  }

  private space(): void {
    const s = this.s;
    while (this.i < s.length) {
      const c = s.charCodeAt(this.i);
      if (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) this.i++;
      else break;
    }
  }

  private value(depth: number, pointer: string): JSONValue {
    const s = this.s;
    if (this.i >= s.length) this.fail("unexpected end of input");
    const c = s[this.i];
    if (c === "{") return this.object(depth, pointer);
    if (c === "[") return this.array(depth, pointer);
    if (c === '"') return this.string();
    if (c === "t") return this.literal("true", true);
    if (c === "f") return this.literal("false", false);
    if (c === "n") return this.literal("null", null);
    if (c === "-" || (c >= "0" && c <= "9")) return this.number(pointer);
    return this.fail(`unexpected character ${JSON.stringify(c)}`);
  }

  private literal<T>(word: string, value: T): T {
    if (this.s.startsWith(word, this.i)) {
      this.i += word.length;
      return value;
    }
    return this.fail("invalid literal");
  }

  private object(depth: number, pointer: string): JSONObject {
    if (depth > limits.depth) this.fail(`nested deeper than ${limits.depth} levels`);
    this.i++;
    const members: Array<readonly [string, JSONValue]> = [];
    const seen = new Set<string>();
    this.space();
    if (this.s[this.i] === "}") {
      this.i++;
      return new JSONObject(members);
    }
    for (;;) {
      this.space();
      if (this.s[this.i] !== '"') this.fail("expected a member name");
      const key = this.string();
      if (seen.has(key)) this.fail("duplicate key in object");
      seen.add(key);
      this.space();
      if (this.s[this.i] !== ":") this.fail("expected ':'");
      this.i++;
      this.space();
      members.push([key, this.value(depth + 1, `${pointer}/${key.replace(/~/g, "~0").replace(/\//g, "~1")}`)]);
      this.space();
      const next = this.s[this.i++];
      if (next === "}") return new JSONObject(members);
      if (next !== ",") this.fail("expected ',' or '}'", this.i - 1);
    }
  }

  private array(depth: number, pointer: string): JSONValue[] {
    if (depth > limits.depth) this.fail(`nested deeper than ${limits.depth} levels`);
    this.i++;
    const items: JSONValue[] = [];
    this.space();
    if (this.s[this.i] === "]") {
      this.i++;
      return items;
    }
    for (;;) {
      this.space();
      items.push(this.value(depth + 1, `${pointer}/${items.length}`));
      this.space();
      const next = this.s[this.i++];
      if (next === "]") return items;
      if (next !== ",") this.fail("expected ',' or ']'", this.i - 1);
    }
  }

  private string(): string {
    const s = this.s;
    const start = ++this.i;
    // Fast path: no escape.
    let j = start;
    for (; j < s.length; j++) {
      const c = s.charCodeAt(j);
      if (c === 0x22 || c === 0x5c || c < 0x20) break;
    }
    let out = s.slice(start, j);
    this.i = j;
    for (;;) {
      if (this.i >= s.length) this.fail("unterminated string");
      const c = s.charCodeAt(this.i);
      if (c === 0x22) {
        this.i++;
        break;
      }
      if (c < 0x20) this.fail("control character in string");
      if (c !== 0x5c) {
        const from = this.i;
        while (this.i < s.length) {
          const d = s.charCodeAt(this.i);
          if (d === 0x22 || d === 0x5c || d < 0x20) break;
          this.i++;
        }
        out += s.slice(from, this.i);
        continue;
      }
      const e = s[this.i + 1];
      this.i += 2;
      switch (e) {
        case '"': out += '"'; break;
        case "\\": out += "\\"; break;
        case "/": out += "/"; break;
        case "b": out += "\b"; break;
        case "f": out += "\f"; break;
        case "n": out += "\n"; break;
        case "r": out += "\r"; break;
        case "t": out += "\t"; break;
        case "u": {
          const unit = this.hex4();
          if (unit >= 0xd800 && unit <= 0xdbff) {
            if (s[this.i] !== "\\" || s[this.i + 1] !== "u") this.fail("unpaired UTF-16 surrogate escape");
            this.i += 2;
            const low = this.hex4();
            if (low < 0xdc00 || low > 0xdfff) this.fail("unpaired UTF-16 surrogate escape");
            out += String.fromCharCode(unit, low);
          } else if (unit >= 0xdc00 && unit <= 0xdfff) {
            this.fail("unpaired UTF-16 surrogate escape");
          } else {
            out += String.fromCharCode(unit);
          }
          break;
        }
        default:
          this.fail("invalid escape sequence", this.i - 2);
      }
    }
    if (out.length > limits.stringBytes / 4 && utf8Length(out) > limits.stringBytes) {
      this.fail(`string longer than ${limits.stringBytes} bytes`);
    }
    return out;
  }

  private hex4(): number {
    const text = this.s.slice(this.i, this.i + 4);
    if (!/^[0-9a-fA-F]{4}$/.test(text)) this.fail("invalid escape sequence");
    this.i += 4;
    return parseInt(text, 16);
  }

  private number(pointer: string): JSONNumber {
    const match = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
    match.lastIndex = this.i;
    const found = match.exec(this.s);
    if (!found) return this.fail("invalid number");
    const text = found[0];
    const end = this.i + text.length;
    const next = this.s[end];
    if (next !== undefined && /[0-9.eE+-]/.test(next)) this.fail("invalid number");
    const parsed = parseNumber(text, pointer || "/");
    if (!parsed) this.fail(`invalid number ${JSON.stringify(text)} (at ${pointer || "/"})`);
    this.i = end;
    return parsed;
  }
}

/** The exact number `text` spells (RFC 8259 syntax, already checked), or undefined when it
 *  breaks a limit of docs/PROTOCOL.md, "Limits". */
function parseNumber(text: string, _pointer: string): JSONNumber | undefined {
  if (text.length > limits.numberBytes) return undefined;
  let i = 0;
  let sign = 1;
  if (text[0] === "-") {
    sign = -1;
    i = 1;
  }
  let integer = "";
  while (i < text.length && text[i] >= "0" && text[i] <= "9") integer += text[i++];
  let fraction = "";
  if (text[i] === ".") {
    i++;
    while (i < text.length && text[i] >= "0" && text[i] <= "9") fraction += text[i++];
  }
  let exponent = 0;
  if (text[i] === "e" || text[i] === "E") {
    i++;
    let exponentSign = 1;
    if (text[i] === "+") i++;
    else if (text[i] === "-") {
      exponentSign = -1;
      i++;
    }
    const written = text.slice(i).replace(/^0+(?=.)/, "");
    if (written.length > 6 || Number(written) > limits.exponent) return undefined;
    exponent = exponentSign * Number(written);
  }
  let digits = integer + fraction;
  let point = integer.length + exponent;
  const leading = digits.match(/^0*/)![0].length;
  digits = digits.slice(leading);
  point -= leading;
  digits = digits.replace(/0+$/, "");
  const number = new JSONNumber(sign, digits, point);
  if (number.text.length > limits.numberBytes || Math.abs(number.canonicalExponent) > limits.exponent) return undefined;
  return number;
}

/** The canonical text of a number spelled `text` (RFC 8259 syntax), or undefined when it breaks a limit. */
export function parseNumberText(text: string): string | undefined {
  return parseNumber(text, "/")?.text;
}

/** ECMAScript's Number::toString layout, applied to exact digits. */
function layout(sign: number, digits: string, n: number): string {
  if (digits === "") return "0";
  const k = digits.length;
  const minus = sign < 0 ? "-" : "";
  if (k <= n && n <= 21) return minus + digits + "0".repeat(n - k);
  if (0 < n && n <= 21) return minus + digits.slice(0, n) + "." + digits.slice(n);
  if (-6 < n && n <= 0) return minus + "0." + "0".repeat(-n) + digits;
  const e = n - 1;
  return minus + digits[0] + (k > 1 ? "." + digits.slice(1) : "") + "e" + (e < 0 ? "-" : "+") + String(Math.abs(e));
}

/** Parses one JSON document (text already decoded). Throws `ReplicaError` (`invalidRecord`).
 *  `depth` is the nesting level of the document itself: 1 for a record; -1 for an answer's body
 *  `{"<collection>":[…]}`, whose two containers do not count against a record's 64 levels. */
export function parseJSON(text: string, depth = 1): JSONValue {
  return new Parser(text).document(depth);
}

// MARK: - Writing

/** The canonical text of `value`. */
export function canonical(value: JSONValue): string {
  const out: string[] = [];
  write(value, out);
  return out.join("");
}

function write(value: JSONValue, out: string[]): void {
  if (value === null) out.push("null");
  else if (value === true) out.push("true");
  else if (value === false) out.push("false");
  else if (typeof value === "string") out.push(quote(value));
  else if (value instanceof JSONNumber) out.push(value.text);
  else if (Array.isArray(value)) {
    out.push("[");
    value.forEach((item, index) => {
      if (index > 0) out.push(",");
      write(item, out);
    });
    out.push("]");
  } else {
    out.push("{");
    value.members.forEach(([key, item], index) => {
      if (index > 0) out.push(",");
      out.push(quote(key), ":");
      write(item, out);
    });
    out.push("}");
  }
}

const needsEscape = /["\\\u0000-\u001f]/;

/** A string in canonical form: only `"`, `\`, and control characters escaped. */
export function quote(text: string): string {
  if (!needsEscape.test(text)) return `"${text}"`;
  let out = '"';
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) out += '\\"';
    else if (c === 0x5c) out += "\\\\";
    else if (c === 0x0a) out += "\\n";
    else if (c === 0x0d) out += "\\r";
    else if (c === 0x09) out += "\\t";
    else if (c < 0x20) out += "\\u00" + c.toString(16).padStart(2, "0");
    else out += text[i];
  }
  return out + '"';
}

// MARK: - Records

/** A record as the wire holds it: its id, hidden state and canonical content (without `hidden`). */
export interface WireRecord {
  readonly id: string;
  readonly hidden: boolean;
  /** The canonical JSON of the record's content: what the state digest hashes. */
  readonly body: string;
}

/** Reads a record from parsed JSON: an object with a string id (1 to 512 UTF-8 bytes, no NUL)
 *  and an optional boolean `hidden`. */
export function recordFrom(value: JSONValue): WireRecord {
  if (!(value instanceof JSONObject)) throw new ReplicaError("invalidRecord", "record: not a JSON object");
  const id = value.get("id");
  if (id === undefined) throw new ReplicaError("invalidRecord", 'record: missing the "id" member');
  if (typeof id !== "string") throw new ReplicaError("invalidRecord", 'record: "id" must be a string');
  if (id.length === 0) throw new ReplicaError("invalidRecord", 'record: "id" is empty');
  if (utf8Length(id) > limits.idBytes) throw new ReplicaError("invalidRecord", `record: "id" is longer than ${limits.idBytes} bytes`);
  if (id.includes("\u0000")) throw new ReplicaError("invalidRecord", 'record: "id" holds NUL (U+0000)');
  const hidden = value.get("hidden");
  if (hidden !== undefined && typeof hidden !== "boolean") throw new ReplicaError("invalidRecord", 'record: "hidden" must be true or false');
  const content = new JSONObject(value.members.filter(([key]) => key !== "hidden") as Array<readonly [string, JSONValue]>);
  return { id, hidden: hidden === true, body: canonical(content) };
}

/** The wire form of a record: `{"hidden":true,…}` first when hidden. */
export function wireText(record: WireRecord): string {
  return record.hidden ? (record.body === "{}" ? '{"hidden":true}' : '{"hidden":true,' + record.body.slice(1)) : record.body;
}

/** Parses a record as a writer sends it (any RFC 8259 spelling) to its wire record. */
export function parseRecord(text: string): WireRecord {
  return recordFrom(parseJSON(text));
}

// MARK: - App values

/** The JSON value of an app's JavaScript value: objects, arrays, strings, finite numbers,
 *  booleans and null; anything else is refused. */
export function fromJavaScript(value: unknown, depth = 1): JSONValue {
  if (depth > limits.depth + 1) throw new ReplicaError("invalidRecord", `record: nested deeper than ${limits.depth} levels`);
  if (typeof value === "string") return wellFormed(value);
  if (value === null || typeof value === "boolean") return value;
  if (typeof value === "number") return JSONNumber.of(value);
  if (Array.isArray(value)) return value.map((item) => fromJavaScript(item, depth + 1));
  if (typeof value === "object" && value !== null) {
    if (value instanceof JSONNumber || value instanceof JSONObject) return value;
    const prototype = Object.getPrototypeOf(value);
    if (prototype !== Object.prototype && prototype !== null) {
      throw new ReplicaError("invalidRecord", `record: a ${(value as object).constructor?.name ?? "non-plain object"} is not a JSON value (convert it first: a Date to a string, a Map to an object)`);
    }
    const members: Array<readonly [string, JSONValue]> = [];
    for (const [key, item] of Object.entries(value)) {
      if (item === undefined) continue;
      members.push([wellFormed(key), fromJavaScript(item, depth + 1)]);
    }
    return new JSONObject(members);
  }
  throw new ReplicaError("invalidRecord", `record: a ${typeof value} is not a JSON value`);
}

const loneSurrogate = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** `text`, refused when it holds an unpaired UTF-16 surrogate (no UTF-8 can carry it). */
function wellFormed(text: string): string {
  if (loneSurrogate.test(text)) throw new ReplicaError("invalidRecord", "record: a string holds an unpaired UTF-16 surrogate, which no UTF-8 text can carry", JSON.stringify(text));
  return text;
}

/** The app's JavaScript value of a JSON value: numbers become doubles. */
export function toJavaScript(value: JSONValue): unknown {
  if (value === null || typeof value === "boolean" || typeof value === "string") return value;
  if (value instanceof JSONNumber) return value.toNumber();
  if (Array.isArray(value)) return value.map(toJavaScript);
  const out: Record<string, unknown> = {};
  for (const [key, item] of value.members) {
    // A member named __proto__ stays a member (an assignment would set the object's prototype).
    if (key === "__proto__") Object.defineProperty(out, key, { value: toJavaScript(item), enumerable: true, writable: true, configurable: true });
    else out[key] = toJavaScript(item);
  }
  return out;
}
