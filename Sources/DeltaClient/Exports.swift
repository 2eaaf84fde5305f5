@_exported import struct DeltaCore.BlobHash
@_exported import struct DeltaCore.BlobReference
@_exported import enum DeltaCore.Filter
@_exported import struct DeltaCore.JSONMember
@_exported import enum DeltaCore.JSONValue
// The wire types an app names, re-exported so that `import DeltaClient` alone is enough: records,
// the filter language of queries and selections, JSON values and their object members, and the error filters and records
// throw when they do not parse.
@_exported import struct DeltaCore.Record
@_exported import struct DeltaCore.Selection
@_exported import struct DeltaCore.WireError
