import Foundation

/// The lines of a gzip stream, decompressed into one buffer and handed out in place, with a
/// SHA-256 of the content kept as it goes: the reading half of `SnapshotReader`.
///
/// Memory stays bounded by the longest line plus one piece of output. The content is hashed in
/// large pieces when the buffer is compacted, not line by line.
final class InflatingLines {
    private let source: () throws -> [UInt8]?
    private let worker = StreamWorker("deltasnap inflate") { try InflateTransform() }
    private var sourceEnded = false
    private var ended: WireError??
    private var storage: UnsafeMutablePointer<UInt8>
    private var capacity = 1 << 20
    private var start = 0
    private var end = 0
    private var lastLineStart = 0
    private var hashed = 0
    private var hasher = SHA256()
    /// Lines returned so far.
    private(set) var lineNumber = 0
    /// Decompressed bytes returned so far, newlines included.
    private(set) var contentBytes = 0

    /// Reads compressed bytes from `source`, which returns nil at the end of the file.
    init(source: @escaping () throws -> [UInt8]?) throws {
        self.source = source
        storage = .allocate(capacity: capacity)
    }

    deinit {
        worker.cancel()
        storage.deallocate()
    }

    /// The next line without its newline, valid until the next call; nil at the end of the
    /// complete stream.
    func next() throws -> UnsafeBufferPointer<UInt8>? {
        var searched = start
        while true {
            if let newline = memchr(storage + searched, Int32(UInt8(ascii: "\n")), end - searched) {
                let lineEnd = storage.distance(to: newline.assumingMemoryBound(to: UInt8.self))
                let line = UnsafeBufferPointer(start: storage + start, count: lineEnd - start)
                lastLineStart = start
                contentBytes += line.count + 1
                start = lineEnd + 1
                lineNumber += 1
                return line
            }
            searched = end
            let kept = start
            guard try fill() else {
                if start < end { throw WireError(.snapshot, "the last line has no newline", evidence: "line \(lineNumber + 1) is cut off") }
                return nil
            }
            searched -= kept - start
        }
    }

    /// Whether any content follows the last line returned; throws when the stream is cut off.
    var hasMoreContent: Bool {
        get throws {
            while start == end {
                guard try fill() else { return false }
            }
            return true
        }
    }

    /// The SHA-256 (hex) of all content before the last line returned.
    func digestBeforeLastLine() -> String {
        hashed = hash(from: hashed, to: lastLineStart)
        return hasher.hexDigest()
    }

    private func hash(from: Int, to: Int) -> Int {
        if to > from { hasher.update(UnsafeRawBufferPointer(start: storage + from, count: to - from)) }
        return max(from, to)
    }

    /// Takes the next decompressed piece from the worker. Compacts the buffer first, hashing
    /// what leaves it (after the trailer has been read the hash no longer matters), and grows it
    /// only for a line longer than it. Returns false at the verified end of the stream.
    private func fill() throws -> Bool {
        guard let block = try nextBlock() else { return false }
        if start > 0 {
            hashed = hash(from: hashed, to: start)
            storage.update(from: storage + start, count: end - start)
            end -= start
            hashed -= start
            lastLineStart = max(0, lastLineStart - start)
            start = 0
        }
        if capacity - end < block.count {
            let grownCapacity = max(capacity * 2, end + block.count)
            let grown = UnsafeMutablePointer<UInt8>.allocate(capacity: grownCapacity)
            grown.update(from: storage, count: end)
            storage.deallocate()
            storage = grown
            capacity = grownCapacity
        }
        block.withUnsafeBufferPointer { (storage + end).update(from: $0.baseAddress!, count: $0.count) }
        end += block.count
        return true
    }

    /// The next decompressed piece, feeding the worker from the source (on this thread) while it
    /// has room; nil at the verified end of the stream.
    private func nextBlock() throws -> [UInt8]? {
        if let ended {
            if let failure = ended { throw failure }
            return nil
        }
        while true {
            let feed = !sourceEnded && worker.wantsInput
            switch worker.take(wait: !feed) {
            case .bytes(let bytes): return bytes
            case .end:
                ended = .some(nil)
                return nil
            case .failure(let failure):
                ended = failure
                throw failure
            case nil:
                if let chunk = try source() {
                    if !chunk.isEmpty { worker.push(chunk) }
                } else {
                    sourceEnded = true
                    worker.endInput()
                }
            }
        }
    }
}
