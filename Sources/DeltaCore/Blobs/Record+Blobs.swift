extension Record {
    /// The blobs this record references, each once, in the order they first appear; throws
    /// `WireError(.blob)`, with a JSON Pointer to it, for an object with a `"$blob"` member that
    /// is not a well-formed reference. A record without the bytes `"$blob"` is not parsed again.
    public func blobReferences() throws -> [BlobReference] {
        guard body.containsBlobMarker else { return [] }
        var found: [BlobReference] = []
        try Record.collect(try JSONValue(parsing: body), into: &found)
        return found
    }

    private static func collect(_ value: JSONValue, into found: inout [BlobReference]) throws {
        switch value {
        case .object(let members) where members.contains(where: { $0.key == "$blob" }):
            let reference = try BlobReference(value)
            if !found.contains(where: { $0.hash == reference.hash }) { found.append(reference) }
        case .object(let members):
            for member in members {
                do { try collect(member.value, into: &found) } catch let error as WireError { throw error.within(member.key) }
            }
        case .array(let elements):
            for (index, element) in elements.enumerated() {
                do { try collect(element, into: &found) } catch let error as WireError { throw error.within(String(index)) }
            }
        default: break
        }
    }
}

extension [UInt8] {
    /// Whether the bytes `"$blob"` occur: canonical JSON writes that key only so.
    package var containsBlobMarker: Bool {
        let marker: [UInt8] = Array(#""$blob""#.utf8)
        guard count >= marker.count else { return false }
        return withUnsafeBufferPointer { buffer in
            var index = 0
            while index <= buffer.count - marker.count {
                if buffer[index] == 0x22 && buffer[index + 1] == 0x24 && buffer[index + 2] == 0x62 {
                    var matched = true
                    for offset in 3..<marker.count where buffer[index + offset] != marker[offset] {
                        matched = false
                        break
                    }
                    if matched { return true }
                }
                index += 1
            }
            return false
        }
    }
}
