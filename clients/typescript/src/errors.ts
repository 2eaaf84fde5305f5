// The package's one error type.

/** What kind of failure a `ReplicaError` is. */
export type ReplicaErrorKind =
  /** The app asked for something the replica cannot do (an unknown collection, a bad option). */
  | "configuration"
  /** A value that is not a record, or breaks a limit of docs/PROTOCOL.md, "Records". */
  | "invalidRecord"
  /** A snapshot that is damaged or not a snapshot (docs/SNAPSHOT-FORMAT.md). */
  | "snapshot"
  /** No answer: the network, a timeout. Transient. */
  | "network"
  /** A 5xx or 429. Transient; `retryAt` says when to try again. */
  | "serverUnavailable"
  /** An answer the replica cannot use (it resets where the protocol says so). */
  | "unusableAnswer"
  /** The server refused (4xx other than the protocol's resets), or a write the replica turns down. */
  | "refused"
  /** A sync waits for its back-off (`sync({ force: true })` tries anyway). */
  | "backingOff"
  /** The storage failed, or is full. */
  | "store"
  /** The replica is closed. */
  | "closed";

/** Every failure of this package: `what: why (evidence)`. */
export class ReplicaError extends Error {
  /** What kind of failure. */
  readonly kind: ReplicaErrorKind;
  /** The reason, without the evidence. */
  readonly reason: string;
  /** What shows it: a status, a path, a value; undefined when there is nothing to add. */
  readonly evidence: string | undefined;
  /** For transient failures, when a retry makes sense. */
  readonly retryAt: Date | undefined;

  constructor(kind: ReplicaErrorKind, reason: string, evidence?: string, retryAt?: Date) {
    super(evidence === undefined ? reason : `${reason} (${evidence})`);
    this.name = "ReplicaError";
    this.kind = kind;
    this.reason = reason;
    this.evidence = evidence;
    this.retryAt = retryAt;
  }

  /** Whether trying again later may succeed (the network, the server's load, a back-off). */
  get isTransient(): boolean {
    return this.kind === "network" || this.kind === "serverUnavailable" || this.kind === "backingOff";
  }
}
