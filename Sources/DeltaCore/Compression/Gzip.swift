import CZlib
import Foundation

/// A streaming decompressor for gzip or zlib data, with bounded output per call.
public final class Inflater {
    private let stream: UnsafeMutablePointer<z_stream>
    private var output: [UInt8]
    /// True once the compressed stream's end (and its checksum) has been read.
    public private(set) var isFinished = false
    /// Total compressed bytes consumed so far.
    public private(set) var compressedCount = 0

    /// Creates a decompressor that accepts gzip or zlib framing (detected from the header),
    /// handing out its output in pieces of at most `pieceSize` bytes.
    public init(pieceSize: Int = 1 << 16) throws {
        output = [UInt8](repeating: 0, count: max(1, pieceSize))
        stream = .allocate(capacity: 1)
        stream.initialize(to: z_stream())
        let status = inflateInit2_(stream, 15 + 32, zlibVersion(), Int32(MemoryLayout<z_stream>.size))
        guard status == Z_OK else {
            stream.deallocate()
            throw WireError(.compression, "inflateInit2 failed", evidence: "zlib status \(status)")
        }
    }

    deinit {
        inflateEnd(stream)
        stream.deallocate()
    }

    /// Decompresses `input`, calling `sink` with each piece of output (at most `pieceSize` bytes
    /// at a time). Output zlib holds back for lack of room is collected before it returns.
    ///
    /// Throws on corrupt data, a failed checksum, or bytes after the end of the stream.
    public func decompress(_ input: some ContiguousBytes, _ sink: ([UInt8]) throws -> Void) throws {
        try input.withUnsafeBytes { raw in
            guard raw.count > 0 else { return }
            var offset = 0
            var produced = 0
            repeat {
                let step = try output.withUnsafeMutableBytes { try decompress(UnsafeRawBufferPointer(rebasing: raw[offset...]), into: $0) }
                offset += step.consumed
                produced = step.produced
                if produced > 0 { try sink(Array(output[0..<produced])) }
            } while (offset < raw.count || produced == output.count) && !isFinished
        }
    }

    /// Decompresses from `input` straight into `output` until one of them is used up or the
    /// stream ends; returns how many bytes of each were used. Empty input collects output zlib
    /// still holds from earlier input. Throws on corrupt data, a failed
    /// checksum, or input after the end of the stream.
    public func decompress(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) throws -> (consumed: Int, produced: Int) {
        guard output.count > 0 else { return (0, 0) }
        if isFinished {
            guard input.isEmpty else { throw WireError(.compression, "data after the end of the compressed stream", evidence: "\(input.count) more bytes") }
            return (0, 0)
        }
        stream.pointee.next_in = UnsafeMutablePointer(mutating: input.baseAddress?.assumingMemoryBound(to: Bytef.self))
        stream.pointee.avail_in = uInt(input.count)
        stream.pointee.next_out = output.baseAddress!.assumingMemoryBound(to: Bytef.self)
        stream.pointee.avail_out = uInt(output.count)
        defer {
            stream.pointee.next_in = nil
            stream.pointee.next_out = nil
        }
        let status = inflate(stream, Z_NO_FLUSH)
        let consumed = input.count - Int(stream.pointee.avail_in)
        compressedCount += consumed
        try check(status)
        if isFinished && consumed < input.count {
            throw WireError(.compression, "data after the end of the compressed stream", evidence: "\(input.count - consumed) more bytes")
        }
        return (consumed, output.count - Int(stream.pointee.avail_out))
    }

    private func check(_ status: Int32) throws {
        switch status {
        case Z_OK, Z_BUF_ERROR: break
        case Z_STREAM_END: isFinished = true
        default:
            let message = stream.pointee.msg.map { String(cString: $0) } ?? "zlib status \(status)"
            throw WireError(.compression, "corrupt compressed data", evidence: message)
        }
    }

    /// Throws unless the whole compressed stream, with its checksum, has been read.
    public func requireFinished() throws {
        guard isFinished else {
            throw WireError(.compression, "the compressed stream is truncated", evidence: "after \(compressedCount) bytes")
        }
    }
}

/// Decompresses a complete gzip or zlib stream in one call.
public func gunzip(_ bytes: some ContiguousBytes) throws -> [UInt8] {
    let inflater = try Inflater()
    var out: [UInt8] = []
    try inflater.decompress(bytes) { out.append(contentsOf: $0) }
    try inflater.requireFinished()
    return out
}
