public import DeltaCore

extension WriteTransaction {
    /// Why `record` may not be written for the blobs it references, or nil when it may: a
    /// malformed reference, or one to a blob this store does not hold whole (`blob-missing`), so
    /// that no device ever receives a reference to a file that is not there. A `user` may
    /// reference only blobs they uploaded, or that `previous` (the record's stored version)
    /// already references; any other blob is missing to them, whether it exists or not. What the
    /// check found held stays held until the transaction ends (`heldBlobs`).
    public func blobRefusal(_ record: Record, user: String? = nil, previous: Record? = nil) async throws -> BlobRefusal? {
        let references: [BlobReference]
        do { references = try record.blobReferences() } catch let error as WireError {
            return .invalid(error)
        }
        guard !references.isEmpty else { return nil }
        let kept = Set(((try? previous?.blobReferences()) ?? []).map(\.hash))
        let inherited = references.map(\.hash).filter { user != nil && kept.contains($0) }
        let own = references.map(\.hash).filter { !inherited.contains($0) }
        let held = try await heldBlobs(inherited, uploadedBy: nil).union(try await heldBlobs(own, uploadedBy: user))
        let missing = references.map(\.hash).filter { !held.contains($0) }
        return missing.isEmpty ? nil : .missing(missing)
    }
}

/// Why a record's blob references keep it from being written.
public enum BlobRefusal: Sendable, Equatable, CustomStringConvertible {
    /// An object with a `"$blob"` member that is not a well-formed reference.
    case invalid(WireError)
    /// References to blobs the store does not hold: upload them first (`PUT /blobs/{sha256}`).
    case missing([BlobHash])

    /// `what: why (evidence)`, starting `blob-missing:` for missing blobs.
    public var description: String {
        switch self {
        case .invalid(let error): error.description
        case .missing(let hashes):
            "blob-missing: the record references \(hashes.count == 1 ? "a blob" : "blobs") the server does not hold; upload \(hashes.count == 1 ? "it" : "them") first with PUT /blobs/{sha256} (\(hashes.map(\.hex).joined(separator: ", ")))"
        }
    }
}
