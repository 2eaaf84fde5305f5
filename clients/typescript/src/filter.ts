// The filter language (docs/PROTOCOL.md, "Selections"): the same on the server, in selections,
// in rules and in a replica's local queries, with one ordering of JSON values (exact decimals,
// code point order, different kinds never equal).

import { ReplicaError } from "./errors.js";
import { JSONNumber, JSONObject, type JSONValue, canonical, compareCodePoints, fromJavaScript, utf8Length } from "./json.js";

/** A filter as an app writes it: `{ price: { lt: 10 } }`, `{ and: [...] }`, `{ or: [...] }`, `{ not: ... }`. */
export type FilterInput = Readonly<Record<string, unknown>>;

type Scalar = null | boolean | string | JSONNumber;

/** A checked filter. */
export type Filter =
  | { readonly op: "and" | "or"; readonly filters: readonly Filter[] }
  | { readonly op: "not"; readonly filter: Filter }
  | { readonly op: "eq" | "ne" | "lt" | "lte" | "gt" | "gte" | "has"; readonly member: string; readonly value: Scalar }
  | { readonly op: "in"; readonly member: string; readonly values: readonly Scalar[] }
  | { readonly op: "exists"; readonly member: string; readonly value: boolean };

const bounds = { bytes: 4096, depth: 8, conditions: 64, values: 256 } as const;
const operators = ["eq", "ne", "lt", "lte", "gt", "gte", "in", "exists", "has"];

function refuse(why: string, evidence?: unknown): never {
  throw new ReplicaError("configuration", `filter: ${why}`, evidence === undefined ? undefined : JSON.stringify(evidence));
}

/** Checks an app's filter; throws `ReplicaError` (`configuration`) saying what is wrong. */
export function parseFilter(input: FilterInput): { filter: Filter; canonical: string } {
  const value = fromJavaScript(input);
  const text = canonical(value);
  if (utf8Length(text) > bounds.bytes) refuse(`longer than ${bounds.bytes} bytes`);
  const count = { conditions: 0 };
  return { filter: read(value, 0, count), canonical: text };
}

function read(value: JSONValue, depth: number, count: { conditions: number }): Filter {
  if (!(value instanceof JSONObject) || value.members.length !== 1) refuse("a filter is an object with exactly one key");
  const [key, inner] = value.members[0]!;
  if (key === "and" || key === "or") {
    if (depth + 1 > bounds.depth) refuse(`and, or and not nest at most ${bounds.depth} deep`);
    if (!Array.isArray(inner)) refuse(`"${key}" takes an array of filters`);
    return { op: key, filters: inner.map((item) => read(item, depth + 1, count)) };
  }
  if (key === "not") {
    if (depth + 1 > bounds.depth) refuse(`and, or and not nest at most ${bounds.depth} deep`);
    return { op: "not", filter: read(inner, depth + 1, count) };
  }
  count.conditions += 1;
  if (count.conditions > bounds.conditions) refuse(`at most ${bounds.conditions} conditions`);
  if (!(inner instanceof JSONObject) || inner.members.length !== 1) refuse(`the condition on "${key}" must have exactly one operator`);
  const [operator, operand] = inner.members[0]!;
  if (!operators.includes(operator)) refuse(`unknown operator on "${key}" (use ${operators.join(", ")})`, operator);
  if (operator === "in") {
    if (!Array.isArray(operand)) refuse(`"in" on "${key}" takes an array of values`);
    if (operand.length > bounds.values) refuse(`an "in" holds at most ${bounds.values} values`);
    return { op: "in", member: key, values: operand.map((item) => scalar(item, key)) };
  }
  if (operator === "exists") {
    if (typeof operand !== "boolean") refuse(`"exists" on "${key}" takes true or false`);
    return { op: "exists", member: key, value: operand };
  }
  return { op: operator as "eq", member: key, value: scalar(operand, key) };
}

function scalar(value: JSONValue, member: string): Scalar {
  if (Array.isArray(value) || value instanceof JSONObject) refuse(`the value for "${member}" must be a JSON scalar`);
  return value;
}

/** Whether two scalars or values are equal (different kinds never are). */
function equal(a: JSONValue, b: Scalar): boolean {
  return compareValues(a, b) === 0;
}

/** -1, 0, 1, or undefined when the two are not comparable (different kinds, arrays, objects). */
export function compareValues(a: JSONValue, b: JSONValue): number | undefined {
  if (a === null && b === null) return 0;
  if (typeof a === "boolean" && typeof b === "boolean") return a === b ? 0 : a ? 1 : -1;
  if (typeof a === "string" && typeof b === "string") return compareCodePoints(a, b);
  if (a instanceof JSONNumber && b instanceof JSONNumber) return a.compare(b);
  return undefined;
}

/** Whether `filter` matches the record `record` (its content, an object). */
export function matches(filter: Filter, record: JSONObject): boolean {
  switch (filter.op) {
    case "and":
      return filter.filters.every((inner) => matches(inner, record));
    case "or":
      return filter.filters.some((inner) => matches(inner, record));
    case "not":
      return !matches(filter.filter, record);
    case "exists":
      return (record.get(filter.member) !== undefined) === filter.value;
    default:
      break;
  }
  const value = record.get(filter.member);
  if (value === undefined) return false;
  switch (filter.op) {
    case "eq":
      return equal(value, filter.value);
    case "ne":
      return !equal(value, filter.value);
    case "in":
      return filter.values.some((candidate) => equal(value, candidate));
    case "has":
      return Array.isArray(value) && value.some((item) => equal(item, filter.value));
    default: {
      const order = compareValues(value, filter.value);
      if (order === undefined) return false;
      switch (filter.op) {
        case "lt":
          return order < 0;
        case "lte":
          return order <= 0;
        case "gt":
          return order > 0;
        case "gte":
          return order >= 0;
      }
    }
  }
}

/** The kinds' order for sorting: null, booleans, numbers, strings, arrays, objects. */
function rank(value: JSONValue): number {
  if (value === null) return 0;
  if (typeof value === "boolean") return 1;
  if (value instanceof JSONNumber) return 2;
  if (typeof value === "string") return 3;
  if (Array.isArray(value)) return 4;
  return 5;
}

/** A sort key: a top-level member, smallest first unless `descending`. */
export interface SortKey {
  readonly member: string;
  readonly descending?: boolean;
}

/** The order of two records' values for one sort key (missing last, either way). */
export function compareForSort(a: JSONValue | undefined, b: JSONValue | undefined, descending: boolean): number {
  if (a === undefined || b === undefined) return a === b ? 0 : a === undefined ? 1 : -1;
  const ra = rank(a);
  const rb = rank(b);
  let order = ra !== rb ? (ra < rb ? -1 : 1) : (compareValues(a, b) ?? 0);
  if (descending) order = -order;
  return order;
}
