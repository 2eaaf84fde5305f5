import Foundation

/// The lines of a gzip stream, decompressed into one buffer and handed out in place, with a
/// SHA-256 of the content kept as it goes: the reading half of `SnapshotReader`.
///
/// Memory stays bounded by the longest line plus one piece of output. The content is hashed in
/// large pieces when the buffer is compacted, not line by line.
final class InflatingLines {
    private let source: () throws -> [UInt8]?
    private let inflater: Inflater
    private var compressed: [UInt8] = []
    private var compressedOffset = 0
    private var sourceEnded = false
    private var outputWasFull = false
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
        inflater = try Inflater()
        storage = .allocate(capacity: capacity)
    }

    deinit { storage.deallocate() }

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
                try inflater.requireFinished()
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
                guard try fill() else {
                    try inflater.requireFinished()
                    return false
                }
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

    /// Decompresses more. Compacts the buffer first, hashing what leaves it (after the trailer
    /// has been read the hash no longer matters), and grows it only for a line longer than half of it.
    /// Returns false once nothing more can come: the source has ended and zlib holds no output.
    private func fill() throws -> Bool {
        if start > 0 {
            hashed = hash(from: hashed, to: start)
            storage.update(from: storage + start, count: end - start)
            end -= start
            hashed -= start
            lastLineStart = max(0, lastLineStart - start)
            start = 0
        }
        if end >= capacity / 2 {
            let grown = UnsafeMutablePointer<UInt8>.allocate(capacity: capacity * 2)
            grown.update(from: storage, count: end)
            storage.deallocate()
            storage = grown
            capacity *= 2
        }
        // zlib may hold output it had no room for even after taking all input.
        guard try nextCompressed() || (outputWasFull && !inflater.isFinished) else { return false }
        let space = capacity - end
        let (consumed, produced) = try compressed.withUnsafeBytes { input in
            try inflater.decompress(
                UnsafeRawBufferPointer(rebasing: input[compressedOffset...]),
                into: UnsafeMutableRawBufferPointer(start: storage + end, count: space))
        }
        compressedOffset += consumed
        end += produced
        outputWasFull = produced == space
        if inflater.isFinished, try nextCompressed() {
            throw WireError(.compression, "data after the end of the compressed stream", evidence: "\(compressed.count - compressedOffset) more bytes")
        }
        return true
    }

    /// Whether compressed input is waiting, reading the next piece from the source when needed.
    private func nextCompressed() throws -> Bool {
        while compressedOffset == compressed.count {
            if sourceEnded { return false }
            guard let chunk = try source() else {
                sourceEnded = true
                return false
            }
            compressed = chunk
            compressedOffset = 0
        }
        return true
    }
}
