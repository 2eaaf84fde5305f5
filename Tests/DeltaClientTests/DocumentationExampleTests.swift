import DeltaTestSupport
import Foundation
import Testing

/// The examples of docs/CLIENT.md and the DocC catalog, type-checked against the client as built:
/// an example that no longer compiles (a renamed method, a changed type) fails here.
///
/// Each ```swift block becomes a function of its own, after a prelude that declares what the
/// examples take as given (a `replica`, a `store` URL, an app's `Post`); a block may declare them
/// itself. A block that imports a framework only Apple's platforms have (SwiftUI,
/// BackgroundTasks) is left out, and the test says which.
@Suite("Documentation examples compile")
struct DocumentationExampleTests {
    static let root = ConsumerPackageTests.root

    /// What the examples take as given.
    static let prelude = """
        import DeltaClient
        import Foundation

        let store = URL(fileURLWithPath: "/tmp/widgets.sqlite")
        let bundled = URL(fileURLWithPath: "/tmp/widgets.snapshot")
        let api = URL(string: "https://data.example.com/api")!
        let pickedImageURL = URL(fileURLWithPath: "/tmp/cat.jpg")
        struct Session: Sendable { func currentIDToken() async throws -> String? { nil } }
        let session = Session()
        struct Widget: Codable, Sendable, Identifiable { let id: String; let name: String; let price: Double }
        struct Note: Codable, Sendable, Identifiable { var id: String; var text: String }
        struct Post: Codable, Sendable, Identifiable { var id: String; var caption: String; var photo: BlobReference }
        final class ProgressView { var progress = 0.0 }
        nonisolated(unsafe) let progressView = ProgressView()
        func show<T>(_ value: T) {}
        func reloadViews() async {}

        """

    /// Frameworks an example may import that Linux does not have: its block is not compiled here.
    static let appleOnly = ["SwiftUI", "UIKit", "AppKit", "BackgroundTasks", "WidgetKit"]

    /// The ```swift blocks of a Markdown file, each with whether it is compiled and why not.
    static func blocks(of file: URL) throws -> [(code: String, skipped: String?)] {
        let lines = try String(contentsOf: file, encoding: .utf8).components(separatedBy: "\n")
        var found: [(String, String?)] = []
        var index = 0
        while index < lines.count {
            guard lines[index].trimmingCharacters(in: .whitespaces) == "```swift" else {
                index += 1
                continue
            }
            var code: [String] = []
            index += 1
            while index < lines.count, lines[index].trimmingCharacters(in: .whitespaces) != "```" {
                code.append(lines[index])
                index += 1
            }
            let appleOnly = code.compactMap { line in
                Self.appleOnly.first { line.trimmingCharacters(in: .whitespaces) == "import \($0)" }
            }
            found.append((code.joined(separator: "\n"), appleOnly.first.map { "imports \($0), which only Apple's platforms have" }))
            index += 1
        }
        return found
    }

    /// A block as a function: its imports dropped (the prelude has them), the names it does not
    /// declare itself taken as parameters.
    static func function(_ name: String, _ code: String) -> String {
        let body = code.components(separatedBy: "\n").filter { !$0.hasPrefix("import ") }.joined(separator: "\n")
        func declares(_ name: String) -> Bool { body.contains("let \(name) =") || body.contains("var \(name) =") }
        var head: [String] = []
        if !declares("configuration") {
            head.append("    var configuration = ReplicaConfiguration(storeURL: store, snapshotURL: bundled, serverURL: api)")
            head.append("    configuration.clientKey = nil")
        }
        if !declares("widgets"), !declares("replica") { head.append("    let widgets = replica.collection(Widget.self, named: \"widgets\")\n    _ = widgets") }
        if !declares("notes"), !declares("replica") { head.append("    let notes = replica.collection(Note.self, named: \"notes\")\n    _ = notes") }
        if !declares("post") { head.append("    let post = Post(id: \"p1\", caption: \"\", photo: photo)\n    _ = post") }
        return """
            @available(macOS 14, iOS 17, tvOS 17, watchOS 10, visionOS 1, *)
            func \(name)(\(declares("replica") ? "_" : "_ replica"): Replica, _ photo: BlobReference) async throws {
            \(head.joined(separator: "\n"))
            \(body)
            }

            """
    }

    @Test("Every ```swift block of docs/CLIENT.md and DeltaClient.docc type-checks against DeltaClient, but those importing Apple-only frameworks")
    func examplesTypeCheck() async throws {
        let catalog = Self.root.appendingPathComponent("Sources/DeltaClient/DeltaClient.docc")
        let files =
            [Self.root.appendingPathComponent("docs/CLIENT.md")]
            + (try FileManager.default.contentsOfDirectory(at: catalog, includingPropertiesForKeys: nil)).filter { $0.pathExtension == "md" }.sorted {
                $0.path < $1.path
            }
        let directory = URL(fileURLWithPath: try makeTemporaryDirectory("examples"))
        defer { try? FileManager.default.removeItem(at: directory) }
        var sources = [directory.appendingPathComponent("Prelude.swift")]
        try Self.prelude.write(to: sources[0], atomically: true, encoding: .utf8)
        var compiled = 0
        var skipped: [String] = []
        for file in files {
            for (number, block) in try Self.blocks(of: file).enumerated() {
                let name = "\(file.deletingPathExtension().lastPathComponent)_\(number + 1)"
                if let why = block.skipped {
                    skipped.append("\(name) (\(why))")
                    continue
                }
                let source = directory.appendingPathComponent("\(name).swift")
                try ("import DeltaClient\nimport Foundation\n\n" + Self.function("example_\(name)", block.code)).write(
                    to: source, atomically: true, encoding: .utf8)
                sources.append(source)
                compiled += 1
            }
        }
        #expect(compiled >= 15, "found only \(compiled) examples")
        let arguments = try Self.typeCheckArguments(sources)
        let child = try ChildProcess(arguments[0], Array(arguments.dropFirst()))
        let status = await child.stop(0, timeout: .seconds(300))
        let printed = child.printed
        #expect(
            status == 0,
            "the examples do not type-check:\n\(printed.components(separatedBy: "\n").filter { $0.contains("error:") }.prefix(30).joined(separator: "\n"))")
        print("DocumentationExampleTests: \(compiled) examples type-checked; not compiled: \(skipped.joined(separator: ", "))")
    }

    /// SwiftPM's own compiler arguments for DeltaClient (from the build manifest), turned into a
    /// type-check of `sources` as a module of their own that imports it.
    static func typeCheckArguments(_ sources: [URL]) throws -> [String] {
        let manifest = try String(contentsOf: root.appendingPathComponent(".build/debug.yaml"), encoding: .utf8).components(separatedBy: "\n")
        guard let start = manifest.firstIndex(where: { $0.range(of: #"^\s*"C\.DeltaClient-[^"]*-debug\.module":$"#, options: .regularExpression) != nil }),
            let line = manifest[start...].prefix(10).first(where: { $0.trimmingCharacters(in: .whitespaces).hasPrefix("args:") })
        else { throw TestFailure(".build/debug.yaml: no compile command for DeltaClient (build first)") }
        let json = line.trimmingCharacters(in: .whitespaces).dropFirst("args:".count)
        guard let original = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String] else { throw TestFailure("debug.yaml: args are not a list") }
        let dropWithValue: Set<String> = [
            "-emit-module-path", "-output-file-map", "-index-store-path", "-emit-objc-header-path", "-module-name", "-package-name",
        ]
        let drop: Set<String> = [
            "-emit-dependencies", "-emit-module", "-incremental", "-c", "-enable-batch-mode", "-serialize-diagnostics", "-parseable-output",
            "-emit-objc-header", "-enable-testing", "-parse-as-library",
        ]
        var kept: [String] = []
        var skip = false
        for (index, argument) in original.enumerated() {
            if skip {
                skip = false
                continue
            }
            if index > 0, original[index - 1] == "-Xcc" {
                kept.append(argument)
                continue
            }
            if dropWithValue.contains(argument) {
                skip = true
                continue
            }
            if drop.contains(argument) || argument.hasPrefix("@") || argument.range(of: #"^-j[0-9]+$"#, options: .regularExpression) != nil { continue }
            kept.append(argument)
        }
        return kept + ["-typecheck", "-parse-as-library", "-module-name", "DocExamples"] + sources.map(\.path)
    }
}
