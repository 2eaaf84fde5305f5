import CZlib
import Foundation

/// A streaming gzip compressor whose output depends only on its input and level.
///
/// The gzip header is written explicitly (no file name, modification time 0, OS byte 255
/// "unknown"), so the same bytes compress to the same output on every machine.
public final class GzipCompressor {
    private let stream: UnsafeMutablePointer<z_stream>
    private let header: UnsafeMutablePointer<gz_header>
    private var finished = false
    private var output = [UInt8](repeating: 0, count: 1 << 16)

    /// The zlib compression level used unless told otherwise: 6, the same as `gzip -6`.
    public static let defaultLevel: Int32 = 6

    /// Creates a compressor at `level` (1 fastest … 9 smallest).
    public init(level: Int32 = GzipCompressor.defaultLevel) throws {
        stream = .allocate(capacity: 1)
        stream.initialize(to: z_stream())
        header = .allocate(capacity: 1)
        header.initialize(to: gz_header())
        header.pointee.os = 255
        let status = deflateInit2_(stream, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY, zlibVersion(), Int32(MemoryLayout<z_stream>.size))
        guard status == Z_OK else {
            stream.deallocate()
            header.deallocate()
            throw WireError(.compression, "deflateInit2 failed", evidence: "zlib status \(status)")
        }
        deflateSetHeader(stream, header)
    }

    deinit {
        deflateEnd(stream)
        stream.deallocate()
        header.deallocate()
    }

    /// Compresses `input`, appending whatever compressed bytes are ready to `out`.
    public func compress(_ input: some ContiguousBytes, into out: inout [UInt8]) {
        precondition(!finished, "GzipCompressor.compress after finish")
        input.withUnsafeBytes { raw in run(raw, flush: Z_NO_FLUSH, into: &out) }
    }

    /// Flushes everything compressed so far to `out` (a sync flush), so a reader can decode it now.
    public func flush(into out: inout [UInt8]) {
        precondition(!finished, "GzipCompressor.flush after finish")
        run(UnsafeRawBufferPointer(start: nil, count: 0), flush: Z_SYNC_FLUSH, into: &out)
    }

    /// Ends the stream, appending the last compressed bytes and the gzip trailer to `out`.
    public func finish(into out: inout [UInt8]) {
        precondition(!finished, "GzipCompressor.finish twice")
        run(UnsafeRawBufferPointer(start: nil, count: 0), flush: Z_FINISH, into: &out)
        finished = true
    }

    private func run(_ input: UnsafeRawBufferPointer, flush: Int32, into out: inout [UInt8]) {
        stream.pointee.next_in = UnsafeMutablePointer(mutating: input.baseAddress?.assumingMemoryBound(to: Bytef.self))
        stream.pointee.avail_in = uInt(input.count)
        let capacity = output.count
        output.withUnsafeMutableBufferPointer { buffer in
            repeat {
                stream.pointee.next_out = buffer.baseAddress
                stream.pointee.avail_out = uInt(capacity)
                let status = deflate(stream, flush)
                precondition(status != Z_STREAM_ERROR, "deflate: inconsistent stream state")
                out.append(contentsOf: buffer[0..<(capacity - Int(stream.pointee.avail_out))])
            } while stream.pointee.avail_out == 0
        }
        stream.pointee.next_in = nil
    }
}

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

/// Compresses `bytes` to one gzip member at `level` in one call.
public func gzip(_ bytes: some ContiguousBytes, level: Int32 = GzipCompressor.defaultLevel) throws -> [UInt8] {
    let compressor = try GzipCompressor(level: level)
    var out: [UInt8] = []
    compressor.compress(bytes, into: &out)
    compressor.finish(into: &out)
    return out
}

/// Decompresses a complete gzip or zlib stream in one call.
public func gunzip(_ bytes: some ContiguousBytes) throws -> [UInt8] {
    let inflater = try Inflater()
    var out: [UInt8] = []
    try inflater.decompress(bytes) { out.append(contentsOf: $0) }
    try inflater.requireFinished()
    return out
}
