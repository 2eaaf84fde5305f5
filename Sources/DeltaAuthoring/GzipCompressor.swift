import CZlib
import DeltaCore
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

/// Compresses `bytes` to one gzip member at `level` in one call.
public func gzip(_ bytes: some ContiguousBytes, level: Int32 = GzipCompressor.defaultLevel) throws -> [UInt8] {
    let compressor = try GzipCompressor(level: level)
    var out: [UInt8] = []
    compressor.compress(bytes, into: &out)
    compressor.finish(into: &out)
    return out
}

/// Deflating to one gzip member (see `GzipCompressor`).
final class DeflateTransform: StreamTransform {
    private let compressor: GzipCompressor

    init(level: Int32) throws { compressor = try GzipCompressor(level: level) }

    package func process(_ input: [UInt8], deliver: ([UInt8]) -> Void) throws {
        var out: [UInt8] = []
        compressor.compress(input, into: &out)
        if !out.isEmpty { deliver(out) }
    }

    package func finish(deliver: ([UInt8]) -> Void) throws {
        var out: [UInt8] = []
        compressor.finish(into: &out)
        deliver(out)
    }
}
