import DeltaServer
import DeltaTestSupport
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Testing
import Yams

/// docs/openapi.yaml, the routes and `GET /openapi.json` say the same thing.
@Suite("The OpenAPI description is the routes, and the server serves it")
struct OpenAPITests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let yamlURL = repository.appendingPathComponent("docs/openapi.yaml")
    static let generatedURL = repository.appendingPathComponent("Sources/DeltaServer/OpenAPI/OpenAPIDocument.swift")

    /// docs/openapi.yaml as a JSON object.
    static func description() throws -> [String: Any] {
        let text = try String(contentsOf: yamlURL, encoding: .utf8)
        guard let object = try Yams.load(yaml: text) as? [String: Any] else { throw TestFailure("docs/openapi.yaml: not a mapping") }
        return object
    }

    /// `object` as JSON with sorted keys: the one spelling both sides are compared in.
    static func sortedJSON(_ object: Any) throws -> String {
        String(decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]), as: UTF8.self)
    }

    @Test("every problem type docs/PROTOCOL.md's error table names is one ProblemType lists (what schemathesis checks answers against)")
    func problemTypesInStep() throws {
        let schemas = try #require((try Self.description()["components"] as? [String: Any])?["schemas"] as? [String: Any])
        let listed = Set(try #require((schemas["ProblemType"] as? [String: Any])?["enum"] as? [String]))
        let protocolText = try String(contentsOf: Self.repository.appendingPathComponent("docs/PROTOCOL.md"), encoding: .utf8)
        var named: Set<String> = []
        for line in protocolText.split(separator: "\n") where line.range(of: #"^\| [45][0-9][0-9] \| `"#, options: .regularExpression) != nil {
            let cells = line.split(separator: "|", omittingEmptySubsequences: false)
            guard cells.count > 2 else { continue }
            for name in cells[2].split(separator: "`").enumerated() where name.offset % 2 == 1 { named.insert("urn:deltasnap:problem:" + name.element) }
        }
        #expect(named.count > 40, "the error table was read: \(named.count) names")
        #expect(named.subtracting(listed).isEmpty, "in PROTOCOL.md's error table but not in ProblemType: \(named.subtracting(listed).sorted())")
    }

    @Test("every route is described, and every described operation is a route")
    func routesInStep() throws {
        let paths = try #require(try Self.description()["paths"] as? [String: [String: Any]])
        let methods: Set<String> = ["get", "head", "put", "post", "delete", "patch", "options", "trace"]
        var described: Set<String> = []
        for (path, item) in paths {
            for key in item.keys where methods.contains(key) { described.insert("\(key.uppercased()) \(path)") }
        }
        let routed = Set(Route.allCases.map { "\($0.method.rawValue) \($0.path)" })
        #expect(described.subtracting(routed).isEmpty, "described but not routed: \(described.subtracting(routed).sorted())")
        #expect(routed.subtracting(described).isEmpty, "routed but not described: \(routed.subtracting(described).sorted())")
    }

    @Test("GET /openapi.json serves docs/openapi.yaml as JSON (DELTASNAP_WRITE_OPENAPI=1 regenerates it)")
    func served() async throws {
        let expected = try Self.sortedJSON(try Self.description())
        if ProcessInfo.processInfo.environment["DELTASNAP_WRITE_OPENAPI"] != nil {
            let source = """
                // swift-format-ignore-file
                // Generated from docs/openapi.yaml by `DELTASNAP_WRITE_OPENAPI=1 swift test --filter OpenAPITests`: do not edit.
                // OpenAPITests fails when this and docs/openapi.yaml differ.

                /// docs/openapi.yaml as JSON, served at `GET /openapi.json`.
                enum OpenAPIDocument {
                    /// The document, keys sorted.
                    static let json = ####"\(expected)"####
                }

                """
            try source.write(to: Self.generatedURL, atomically: true, encoding: .utf8)
        }
        try await withServer(.loopback) { client, _ in
            let response = try await client.get("/openapi.json")
            #expect(response.status == .ok)
            #expect(response.headers[.contentType] == "application/json")
            let served = try JSONSerialization.jsonObject(with: Data(String(buffer: response.body).utf8))
            #expect(
                try Self.sortedJSON(served) == expected, "docs/openapi.yaml changed: regenerate with DELTASNAP_WRITE_OPENAPI=1 swift test --filter OpenAPITests"
            )
        }
    }
}
