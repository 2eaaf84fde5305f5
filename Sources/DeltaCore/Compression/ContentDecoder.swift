import Foundation

/// Decodes a response body that may still be gzip-encoded.
///
/// HTTP stacks differ: URLSession decodes `Content-Encoding: gzip` itself, a raw socket does
/// not. A JSON body never starts with the gzip magic bytes `1f 8b`, so the first bytes decide.
public struct ContentDecoder {
    private var inflater: Inflater?
    private var decided = false

    /// Creates a decoder that has seen nothing yet.
    public init() {}

    /// Decodes the next chunk, calling `sink` with the plain bytes.
    public mutating func decode(_ chunk: Data, _ sink: ([UInt8]) throws -> Void) throws {
        guard !chunk.isEmpty else { return }
        if !decided {
            decided = true
            if chunk.count >= 2 && chunk[chunk.startIndex] == 0x1F && chunk[chunk.startIndex + 1] == 0x8B {
                inflater = try Inflater()
            }
        }
        if let inflater {
            try inflater.decompress(chunk, sink)
        } else {
            try sink(Array(chunk))
        }
    }

    /// Throws when a gzip body ended before its end and checksum.
    public func finish() throws {
        try inflater?.requireFinished()
    }
}
