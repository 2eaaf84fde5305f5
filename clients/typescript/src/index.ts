// @deltasnap/client: DeltaSnapshot's replica for the web and Node.

export { Replica } from "./replica.js";
export type { BlobReference, ReplicaOptions, QueryOptions, RecordObject, ReplicaStatus, SyncReport, CollectionSync, Conflict } from "./replica.js";
export { ReplicaError } from "./errors.js";
export type { ReplicaErrorKind } from "./errors.js";
export { MemoryStorage } from "./storage.js";
export type { ReplicaStorage } from "./storage.js";
export { IndexedDBStorage } from "./indexeddb.js";
export type { FilterInput, SortKey } from "./filter.js";
export type { PushSummary } from "./outbox.js";
