// One collection as a replica holds it: the server's records at one token, with their digest,
// and where it was installed from. Stored as the document `collection:<name>`.

import { StateDigest } from "./digest.js";
import { ReplicaError } from "./errors.js";
import type { Filter } from "./filter.js";

/** The part of a collection a replica holds (`selections` in the options). */
export interface Selection {
  readonly filter: Filter | undefined;
  /** The filter's canonical JSON, as sent in `?filter=`. */
  readonly canonicalFilter: string | undefined;
  readonly limit: number | undefined;
  /** 16 hex digits (docs/PROTOCOL.md, "What a client may read of a token"). */
  readonly fingerprint: string;
}

/** A collection's state. Immutable: a change makes a new one. */
export interface CollectionState {
  readonly name: string;
  /** The `ETag` held, exactly as received; "" when none (installed cut down to a selection). */
  readonly etag: string;
  readonly lastModified: string;
  readonly digest: StateDigest;
  /** The token of the bundled snapshot entry it was installed or reset from. */
  readonly installedFrom: string;
  /** The fingerprint of the selection it was installed for. */
  readonly fingerprint: string;
  /** Whether its answers were a user's (`Cache-Control: private`): a sign-out takes it back to the snapshot. */
  readonly private: boolean;
  /** id → canonical content. */
  readonly records: ReadonlyMap<string, string>;
}

/** The stored form. */
interface CollectionDocument {
  etag: string;
  lastModified: string;
  digest: string;
  installedFrom: string;
  fingerprint: string;
  private: boolean;
  ids: string[];
  bodies: string[];
}

/** The document key of a collection. */
export function collectionKey(name: string): string {
  return `collection:${name}`;
}

/** The stored form of `state`. */
export function collectionDocument(state: CollectionState): CollectionDocument {
  return {
    etag: state.etag,
    lastModified: state.lastModified,
    digest: state.digest.hex,
    installedFrom: state.installedFrom,
    fingerprint: state.fingerprint,
    private: state.private,
    ids: [...state.records.keys()],
    bodies: [...state.records.values()],
  };
}

/** Reads a stored collection; throws `ReplicaError` (`store`) when it is not one. */
export function collectionFromDocument(name: string, value: unknown): CollectionState {
  const document = value as Partial<CollectionDocument> | null;
  const digest = StateDigest.parse(document?.digest);
  if (
    !document ||
    typeof document.etag !== "string" ||
    typeof document.lastModified !== "string" ||
    !digest ||
    typeof document.installedFrom !== "string" ||
    typeof document.fingerprint !== "string" ||
    !Array.isArray(document.ids) ||
    !Array.isArray(document.bodies) ||
    document.ids.length !== document.bodies.length
  ) {
    throw new ReplicaError("store", "the stored collection is damaged", name);
  }
  const records = new Map<string, string>();
  document.ids.forEach((id, index) => records.set(id, document.bodies![index]!));
  return {
    name,
    etag: document.etag,
    lastModified: document.lastModified,
    digest,
    installedFrom: document.installedFrom,
    fingerprint: document.fingerprint,
    private: document.private === true,
    records,
  };
}
