import DeltaCore
import Foundation

/// A file of docs/conformance/: the test that generates it compares it with the committed copy,
/// or, with `DELTASNAP_WRITE_VECTORS=1`, writes it. So the vectors never drift from the code.
public enum ConformanceFile {
    /// docs/conformance/ in this checkout.
    public static let directory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("docs/conformance")

    /// Whether this run writes the vectors instead of checking them.
    public static var writing: Bool { ProcessInfo.processInfo.environment["DELTASNAP_WRITE_VECTORS"] != nil }

    /// Nil when `bytes` are what `name` holds (after writing them, when `writing`); else why not.
    public static func check(_ name: String, _ bytes: [UInt8]) throws -> String? {
        let url = directory.appendingPathComponent(name)
        if writing {
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data(bytes).write(to: url)
            return nil
        }
        guard let committed = FileManager.default.contents(atPath: url.path) else {
            return "docs/conformance/\(name) is missing: DELTASNAP_WRITE_VECTORS=1 swift test --filter Conformance writes it"
        }
        guard Array(committed) != bytes else { return nil }
        return
            "docs/conformance/\(name) differs from what the code generates: the code changed the protocol, or the file was edited (DELTASNAP_WRITE_VECTORS=1 rewrites it)"
    }

    /// One case a line: `{"cases":[` then each case's canonical JSON, `]}`. Diffs stay readable.
    public static func cases(_ cases: [JSONValue], note: String) -> [UInt8] {
        var out = Array("{\"note\":".utf8)
        JSONValue.writeString(note, into: &out)
        out.append(contentsOf: Array(",\"cases\":[\n".utf8))
        for (index, value) in cases.enumerated() {
            out.append(contentsOf: value.canonicalBytes)
            out.append(contentsOf: Array((index + 1 < cases.count ? ",\n" : "\n").utf8))
        }
        out.append(contentsOf: Array("]}\n".utf8))
        return out
    }
}

extension JSONValue {
    /// A JSON object of `members`, sorted as canonical objects are.
    public static func members(_ members: KeyValuePairs<String, JSONValue>) -> JSONValue {
        .object(members.map { JSONMember(key: $0.key, value: $0.value) }.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) })
    }
}
