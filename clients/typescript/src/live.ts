// A live query's memory between two changes: every visible record it has seen (parsed, matched
// and keyed once per version), the matching ones in the query's order, and what its callback was
// last given, so that a change of a few records costs a few binary insertions, not a sort of the
// whole collection, and an unchanged record keeps the same (frozen) object from one call to the next.

import { type Filter, type SortKey, compareForSort, matches } from "./filter.js";
import { type JSONObject, type JSONValue, compareCodePoints, toJavaScript } from "./json.js";

/** A query as the replica runs it: the filter parsed, the order's keys spelled out. */
export interface PreparedQuery {
  readonly filter: Filter | undefined;
  readonly order: readonly SortKey[];
  readonly limit: number | undefined;
  readonly offset: number;
}

/** One version of one record, as a query sees it. */
export interface QueryEntry {
  readonly id: string;
  readonly body: string;
  readonly value: JSONObject;
  /** The record's values for the query's sort keys, read once. */
  readonly keys: ReadonlyArray<JSONValue | undefined>;
}

/** Visits each visible record of a collection once: its id and canonical body. */
export type VisibleRecords = (visit: (id: string, body: string) => void) => void;

/** The query's order: its sort keys, then the id (so that an order is always total). */
export function comparator(query: PreparedQuery): (a: QueryEntry, b: QueryEntry) => number {
  return (a, b) => {
    for (let i = 0; i < query.order.length; i++) {
      const order = compareForSort(a.keys[i], b.keys[i], query.order[i]!.descending === true);
      if (order !== 0) return order;
    }
    return compareCodePoints(a.id, b.id);
  };
}

/** Whether `value` passes the query's filter. */
export function admits(query: PreparedQuery, value: JSONObject): boolean {
  return !query.filter || matches(query.filter, value);
}

/** The record's values for the query's sort keys. */
function keysOf(query: PreparedQuery, value: JSONObject): Array<JSONValue | undefined> {
  return query.order.map((key) => value.get(key.member));
}

/** An entry for one version of one record. */
export function entryOf(query: PreparedQuery, id: string, body: string, value: JSONObject): QueryEntry {
  return { id, body, value, keys: keysOf(query, value) };
}

/** Where the query's page ends among `count` ordered matches (its offset is where it starts). */
function pageEnd(query: PreparedQuery, count: number): number {
  return query.limit === undefined ? count : Math.min(count, query.offset + query.limit);
}

/** `entries` (all matching) ordered and cut to the query's page. */
export function page(query: PreparedQuery, entries: QueryEntry[]): QueryEntry[] {
  const precedes = comparator(query);
  const end = pageEnd(query, entries.length);
  if (end === 0) return [];
  let ordered: QueryEntry[];
  if (end * 8 < entries.length) {
    // A small page of many: the first `end` kept in order as the rest stream past.
    ordered = [];
    for (const entry of entries) {
      if (ordered.length === end && precedes(entry, ordered[end - 1]!) >= 0) continue;
      ordered.splice(insertionPoint(ordered, entry, precedes), 0, entry);
      if (ordered.length > end) ordered.pop();
    }
  } else {
    ordered = entries.sort(precedes);
  }
  return ordered.slice(query.offset, end);
}

/** Where `entry` goes in `ordered` (after any equal one). */
function insertionPoint(ordered: readonly QueryEntry[], entry: QueryEntry, precedes: (a: QueryEntry, b: QueryEntry) => number): number {
  let low = 0;
  let high = ordered.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (precedes(ordered[middle]!, entry) <= 0) low = middle + 1;
    else high = middle;
  }
  return low;
}

/** One version of one record in a live query (a class, so that every entry has one shape). */
class LiveEntry implements QueryEntry {
  /** The refresh that last saw this version; an older one is gone or replaced. */
  seen: number;
  /** The app's object for this version: made once, frozen, handed out again while it is unchanged. */
  record: Readonly<Record<string, unknown>> | undefined = undefined;

  constructor(
    readonly id: string,
    readonly body: string,
    readonly value: JSONObject,
    readonly keys: ReadonlyArray<JSONValue | undefined>,
    readonly matches: boolean,
    generation: number,
  ) {
    this.seen = generation;
  }
}

/** One `observe` call's query, refreshed after each change of its collection. */
export class LiveQuery {
  private readonly precedes: (a: QueryEntry, b: QueryEntry) => number;
  /** Every visible record's current version, matching or not. */
  private readonly entries = new Map<string, LiveEntry>();
  /** The matching entries in the query's order, all of them (the page is cut from it). */
  private ordered: LiveEntry[] | undefined;
  /** What the callback was last given. */
  private last: LiveEntry[] | undefined;
  private generation = 0;

  constructor(readonly query: PreparedQuery) {
    this.precedes = comparator(query);
  }

  /** The query's records after a change, or undefined when they are the ones last given (same
   *  records, same versions, same order). `parse` reads a body (the replica's cache of them). */
  refresh(visible: VisibleRecords, parse: (id: string, body: string) => JSONObject): Array<Readonly<Record<string, unknown>>> | undefined {
    const generation = ++this.generation;
    const fresh: LiveEntry[] = [];
    let seen = 0;
    visible((id, body) => {
      const held = this.entries.get(id);
      if (held && held.body === body) {
        held.seen = generation;
        seen += 1;
        return;
      }
      const value = parse(id, body);
      const entry = new LiveEntry(id, body, value, keysOf(this.query, value), admits(this.query, value), generation);
      this.entries.set(id, entry);
      fresh.push(entry);
    });
    // Versions not seen this time: records gone, and the replaced versions of changed ones.
    const gone = this.entries.size - seen - fresh.length;
    if (gone > 0) for (const [id, entry] of this.entries) if (entry.seen !== generation) this.entries.delete(id);
    const result = this.order(fresh, gone, generation);
    const last = this.last;
    if (last && last.length === result.length && result.every((entry, index) => entry === last[index])) return undefined;
    this.last = result;
    return result.map((entry) => (entry.record ??= deepFreeze(toJavaScript(entry.value) as Record<string, unknown>)));
  }

  private order(fresh: LiveEntry[], gone: number, generation: number): LiveEntry[] {
    const query = this.query;
    // The previous order, with the few changes made in it: a record out, a version in.
    if (this.ordered && fresh.length + gone <= Math.max(64, this.ordered.length >>> 5)) {
      // A version not seen this time is gone or replaced (its record's new version is in `fresh`).
      const ordered = this.ordered.filter((entry) => entry.seen === generation);
      for (const entry of fresh) if (entry.matches) ordered.splice(insertionPoint(ordered, entry, this.precedes), 0, entry);
      this.ordered = ordered;
      return ordered.slice(query.offset, pageEnd(query, ordered.length));
    }
    // Many changed (a sync, a reset, the first call): every matching record sorted again, all of
    // them even for a small page, so that the next few changes are insertions.
    const all: LiveEntry[] = [];
    for (const entry of this.entries.values()) if (entry.matches) all.push(entry);
    this.ordered = all.sort(this.precedes);
    return all.slice(query.offset, pageEnd(query, all.length));
  }
}

/** `value` and everything in it made read-only: a live query's records are shared between its calls. */
function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    for (const item of Object.values(value)) deepFreeze(item);
    Object.freeze(value);
  }
  return value;
}
