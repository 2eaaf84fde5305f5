import DeltaCore

/// A `GET /api/{collection}` (or `/api/{collection}?{query}`) read from a connection's raw bytes:
/// only what `NotModifiedBeforeDecoding` needs, and only when the request is plain enough to be sure of it.
struct RawRequest: Equatable {
    /// The request target after `/api/`, unchecked (it may still be an invalid collection name,
    /// or carry a query string).
    let collection: String
    /// The `If-None-Match` value, without surrounding white space.
    let ifNoneMatch: String?
    /// The `If-Modified-Since` value, without surrounding white space.
    let ifModifiedSince: String?
    /// The `Accept-Encoding` value, without surrounding white space (for kept cacheable answers).
    var acceptEncoding: String? = nil
    /// The `Authorization` value, without surrounding white space (for users' `304`s, `UserVerdicts`).
    var authorization: String? = nil

    /// What the bytes at the front of a connection's input are.
    enum Parse: Equatable {
        /// The start of a plain GET whose header block has not arrived whole yet.
        case incomplete
        /// A plain GET whose header block is the first `length` bytes.
        case request(RawRequest, length: Int)
        /// Anything else: for the HTTP/1 decoder.
        case other
    }

    private static let prefix = Array("GET /api/".utf8)
    private static let version = Array(" HTTP/1.1".utf8)
    private static let maximumFields = 100
    /// A pull that names its client reads that client's last mutation too: the router's.
    private static let deltaClient = DeltaHeader.client.lowercased()
    private static let cr = UInt8(ascii: "\r"), lf = UInt8(ascii: "\n")

    /// Reads the request at the front of `bytes`, waiting for at most `limit` bytes of header block.
    static func parse(_ bytes: UnsafeRawBufferPointer, limit: Int) -> Parse {
        let known = min(bytes.count, prefix.count)
        guard bytes.prefix(known).elementsEqual(prefix.prefix(known)) else { return .other }
        var end = -1
        var index = 0
        while index < bytes.count {
            if bytes[index] == lf {
                guard index > 0, bytes[index - 1] == cr else { return .other }
                if index >= 3 && bytes[index - 2] == lf {
                    end = index + 1
                    break
                }
            }
            index += 1
        }
        guard end > 0 else { return bytes.count > limit ? .other : .incomplete }
        guard end <= limit, let request = headerBlock(UnsafeRawBufferPointer(rebasing: bytes[0..<(end - 4)])) else { return .other }
        return .request(request, length: end)
    }

    /// Parses a header block without its final CRLF CRLF; nil unless it is a plain conditional GET.
    private static func headerBlock(_ block: UnsafeRawBufferPointer) -> RawRequest? {
        var lines = splitLines(block)[...]
        guard let requestLine = lines.popFirst(), requestLine.count > prefix.count + version.count,
            requestLine.suffix(version.count).elementsEqual(version)
        else { return nil }
        let target = requestLine.dropFirst(prefix.count).dropLast(version.count)
        guard target.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return nil }
        guard lines.count <= maximumFields else { return nil }
        var ifNoneMatch: String?
        var ifModifiedSince: String?
        var acceptEncoding: String?
        var authorization: String?
        for line in lines {
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > line.startIndex,
                line[..<colon].allSatisfy(isTokenCharacter),
                line.allSatisfy({ $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) })
            else { return nil }
            let name = String(decoding: line[..<colon], as: UTF8.self).lowercased()
            let value = trimmed(line[(colon + 1)...])
            switch name {
            // A browser's cross-origin request is the router's: its answer carries CORS headers (`CrossOrigin`).
            case "content-length", "transfer-encoding", "expect", "upgrade", "origin", Self.deltaClient:
                return nil
            case "connection":
                guard value.lowercased() == "keep-alive" else { return nil }
            case "if-none-match":
                guard ifNoneMatch == nil else { return nil }
                ifNoneMatch = value
            case "if-modified-since":
                guard ifModifiedSince == nil else { return nil }
                ifModifiedSince = value
            case "accept-encoding":
                guard acceptEncoding == nil else { return nil }
                acceptEncoding = value
            case "authorization":
                guard authorization == nil else { return nil }
                authorization = value
            default:
                break
            }
        }
        return RawRequest(
            collection: String(decoding: target, as: UTF8.self), ifNoneMatch: ifNoneMatch, ifModifiedSince: ifModifiedSince, acceptEncoding: acceptEncoding,
            authorization: authorization)
    }

    private static func splitLines(_ block: UnsafeRawBufferPointer) -> [Slice<UnsafeRawBufferPointer>] {
        var lines: [Slice<UnsafeRawBufferPointer>] = []
        var start = 0
        var index = 0
        while index + 1 < block.count {
            if block[index] == cr && block[index + 1] == lf {
                lines.append(block[start..<index])
                start = index + 2
                index += 2
            } else {
                index += 1
            }
        }
        lines.append(block[start..<block.count])
        return lines
    }

    private static func trimmed(_ value: Slice<UnsafeRawBufferPointer>) -> String {
        var slice = value
        while let first = slice.first, first == 0x20 || first == 0x09 { slice = slice.dropFirst() }
        while let last = slice.last, last == 0x20 || last == 0x09 { slice = slice.dropLast() }
        return String(decoding: slice, as: UTF8.self)
    }

    /// RFC 9110 `tchar`.
    private static func isTokenCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): return true
        default: return symbols.contains(byte)
        }
    }

    private static let symbols = Array("!#$%&'*+-.^_`|~".utf8)
}
