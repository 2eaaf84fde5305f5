import DeltaCore

/// The SHA-256 of an upload, computed by a task of its own while the upload receives and writes
/// the next bytes: on a server with two cores, hashing (the largest cost of an upload) then
/// overlaps the network and the disk instead of following them.
///
/// Bytes are handed over in pieces of at least `pieceBytes`; at most `maximumPending` pieces wait
/// to be hashed, so memory stays bounded whatever the upload's size and however slow hashing is.
/// Used by one upload task at a time.
package final class BackgroundHasher: @unchecked Sendable {
    /// The smallest piece handed to the hashing task.
    static let pieceBytes = 1 << 20
    /// The most pieces waiting to be hashed.
    static let maximumPending = 3

    private let pieces: AsyncStream<[UInt8]>.Continuation
    private var hashed: AsyncStream<Void>.Iterator
    private let digest: Task<[UInt8], Never>
    private var piece: [UInt8] = []
    private var pending = 0

    package init() {
        let (pieces, feed) = AsyncStream.makeStream(of: [UInt8].self)
        let (hashed, done) = AsyncStream.makeStream(of: Void.self)
        self.pieces = feed
        self.hashed = hashed.makeAsyncIterator()
        digest = Task.detached {
            var sha = SHA256()
            for await piece in pieces {
                sha.update(piece)
                done.yield()
            }
            done.finish()
            return sha.finalize()
        }
    }

    deinit { pieces.finish() }

    /// Adds bytes; waits while the hashing task is `maximumPending` pieces behind.
    package func update(_ bytes: [UInt8]) async {
        if piece.isEmpty, bytes.count >= Self.pieceBytes {
            // A whole piece already: handed over as it is, not copied.
            piece = bytes
            await handOver()
            return
        }
        if piece.isEmpty { piece.reserveCapacity(Self.pieceBytes + (64 << 10)) }
        piece.append(contentsOf: bytes)
        guard piece.count >= Self.pieceBytes else { return }
        await handOver()
    }

    /// The digest of every byte given.
    package func finalize() async -> [UInt8] {
        if !piece.isEmpty { await handOver() }
        pieces.finish()
        return await digest.value
    }

    private func handOver() async {
        pieces.yield(piece)
        piece = []
        pending += 1
        while pending > Self.maximumPending {
            _ = await hashed.next()
            pending -= 1
        }
    }
}
