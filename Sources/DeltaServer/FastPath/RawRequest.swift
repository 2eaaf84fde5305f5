import DeltaCore
import HTTPTypes

/// A `GET` or `HEAD` of `/api/{collection}` (or `/api/{collection}?{query}`) read from a
/// connection's raw bytes: only what `NotModifiedBeforeDecoding` needs, and only when the request
/// is plain enough to be sure of it.
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
    /// A `HEAD` (a live client's probe), not a `GET`: the same `304`, and never a kept answer's body.
    var isHead = false
    /// It has an `Origin` (a browser's cross-origin request): no answer of the raw path's own fits
    /// it (CORS headers are the router's), so it is taken only to wait (`WaitingRoom`), and every
    /// answer it gets is the router's.
    var hasOrigin = false

    /// The method, as the router's metrics name it.
    var method: String { isHead ? "HEAD" : "GET" }

    /// The collection the request names: the target, or its part before `?wait=` when that is
    /// its whole query (`wait`).
    var name: Substring { wait?.name ?? collection[...] }

    /// `?wait=SECONDS` (docs/PROTOCOL.md, "Live updates") when it is the target's whole query, with
    /// 1 to 6 digits: the collection's name and the seconds asked for (not yet capped); nil otherwise.
    var wait: (name: Substring, seconds: Int)? {
        guard let mark = collection.utf8.firstIndex(of: UInt8(ascii: "?")) else { return nil }
        let query = collection.utf8[collection.utf8.index(after: mark)...]
        guard query.starts(with: "wait=".utf8) else { return nil }
        let digits = query.dropFirst(5)
        guard (1...6).contains(digits.count), digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
        let seconds = digits.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
        return (collection[..<mark], seconds)
    }

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
    private static let headPrefix = Array("HEAD /api/".utf8)
    private static let version = Array(" HTTP/1.1".utf8)
    private static let maximumFields = 100
    /// A pull that names its client reads that client's last mutation too: the router's.
    private static let deltaClient = DeltaHeader.client.lowercased()
    private static let cr = UInt8(ascii: "\r"), lf = UInt8(ascii: "\n")

    /// Reads the request at the front of `bytes`, waiting for at most `limit` bytes of header block.
    static func parse(_ bytes: UnsafeRawBufferPointer, limit: Int) -> Parse {
        let isHead = bytes.first == UInt8(ascii: "H")
        let prefix = isHead ? headPrefix : prefix
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
        guard end <= limit, let request = headerBlock(UnsafeRawBufferPointer(rebasing: bytes[0..<(end - 4)]), prefix: prefix) else {
            return .other
        }
        return .request(request, length: end)
    }

    /// Parses a header block without its final CRLF CRLF; nil unless it is a plain conditional
    /// `GET` (or `HEAD`: `prefix` says which).
    private static func headerBlock(_ block: UnsafeRawBufferPointer, prefix: [UInt8]) -> RawRequest? {
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
        var hasOrigin = false
        for line in lines {
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > line.startIndex,
                line[..<colon].allSatisfy(isTokenCharacter),
                line.allSatisfy({ $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) })
            else { return nil }
            let name = String(decoding: line[..<colon], as: UTF8.self).lowercased()
            let value = trimmed(line[(colon + 1)...])
            switch name {
            case "content-length", "transfer-encoding", "expect", "upgrade", Self.deltaClient:
                return nil
            // A browser's cross-origin request: its answers carry CORS headers (`CrossOrigin`), so
            // only the router's bytes answer it (a live client's wait may still wait here).
            case "origin":
                guard !hasOrigin else { return nil }
                hasOrigin = true
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
            authorization: authorization, isHead: prefix == headPrefix, hasOrigin: hasOrigin)
    }

    /// The request a header block that `parse` took says, as the router would get it through
    /// HTTPTypes: the method, `/api/` and the target without its `?wait=`, the `Host` as the
    /// authority, and every other field in order with the white space around its value dropped.
    /// A live client's request, asked again without waiting (`SharedAnswer`).
    func withoutWait(headerBlock block: UnsafeRawBufferPointer) -> HTTPRequest? {
        // Bytes past ASCII would be read as UTF-8 here and as NIO reads them there: not the same.
        guard block.count >= 4, block.allSatisfy({ $0 < 0x80 }) else { return nil }
        var authority: String?
        var fields = HTTPFields()
        for line in Self.splitLines(UnsafeRawBufferPointer(rebasing: block[0..<(block.count - 4)])).dropFirst() {
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")),
                let name = HTTPField.Name(String(decoding: line[..<colon], as: UTF8.self))
            else { return nil }
            let value = Self.trimmed(line[(colon + 1)...])
            if name.canonicalName == "host" {
                guard authority == nil else { return nil }
                authority = value
            } else {
                fields.append(HTTPField(name: name, value: value))
            }
        }
        return HTTPRequest(method: isHead ? .head : .get, scheme: nil, authority: authority, path: "/api/" + name, headerFields: fields)
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
