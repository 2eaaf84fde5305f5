import DeltaTestSupport
import Foundation
import Testing

@Suite("An app's package that depends on DeltaClient alone")
struct ConsumerPackageTests {
    /// The repository's root, from this file's path.
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test("The README's library example compiles as written, importing only DeltaClient; no server module is compiled and no server package fetched for it")
    func buildsAlone() async throws {
        let readme = try String(contentsOf: Self.root.appendingPathComponent("README.md"), encoding: .utf8)
        let section = try #require(readme.range(of: "## In an app\n"), "README.md has no \"In an app\" section")
        let rest = readme[section.upperBound...]
        let start = try #require(rest.range(of: "```swift\n"))
        let end = try #require(rest[start.upperBound...].range(of: "```\n"))
        let example = String(rest[start.upperBound..<end.lowerBound])
        #expect(example.split(separator: "\n").filter { $0.hasPrefix("import ") } == ["import DeltaClient", "import Foundation"])

        let directory = try makeTemporaryDirectory("consumer")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let manifest = try String(contentsOf: Self.root.appendingPathComponent("Tests/Consumer/Package.swift"), encoding: .utf8)
        try manifest.replacingOccurrences(of: "DELTASNAP_ROOT", with: Self.root.path).write(
            toFile: "\(directory)/Package.swift", atomically: true, encoding: .utf8)
        try FileManager.default.createDirectory(atPath: "\(directory)/Sources/App", withIntermediateDirectories: true)
        // main.swift runs top-level code; the example's function is only compiled, never called.
        try example.write(toFile: "\(directory)/Sources/App/main.swift", atomically: true, encoding: .utf8)

        let swift = try requireProgram(Self.swiftPath(), package: "the Swift toolchain")
        let child = try ChildProcess(swift, ["build", "--package-path", directory, "--scratch-path", "\(directory)/.build"])
        let status = await child.stop(0, timeout: .seconds(900))
        let printed = child.printed
        #expect(status == 0, "swift build of the consumer failed: \(printed.suffix(3000))")
        let built = try FileManager.default.subpathsOfDirectory(atPath: "\(directory)/.build")
        let modules = Set(
            built.compactMap { path -> String? in
                guard path.hasSuffix(".swiftmodule") else { return nil }
                return URL(fileURLWithPath: path).deletingPathExtension().lastPathComponent
            })
        #expect(modules.isSuperset(of: ["DeltaClient", "DeltaCore", "DeltaSQLite"]), "\(modules.sorted())")
        let server = modules.filter {
            ["Hummingbird", "NIO", "Postgres", "DeltaServer", "DeltaStore", "DeltaPostgres", "DeltaAuthoring", "JWTKit"].contains(where: $0.hasPrefix)
        }
        #expect(server.isEmpty, "server modules compiled for an app: \(server.sorted())")
        // Without the Server trait only the client's own dependencies are fetched (issue 37: the
        // app resolved 29 packages before), and the README says how to depend on it that way.
        let fetched = Set((try? FileManager.default.contentsOfDirectory(atPath: "\(directory)/.build/checkouts")) ?? [])
        #expect(fetched.isSubset(of: ["swift-crypto", "swift-asn1"]), "packages fetched for an app: \(fetched.sorted())")
        #expect(readme.contains("traits: []"), "README.md does not tell apps to turn the Server trait off")
        print("ConsumerPackageTests: fetched \(fetched.sorted().joined(separator: ", "))")
        print("ConsumerPackageTests: compiled \(modules.sorted().joined(separator: ", "))")
    }

    /// The `swift` that runs the tests (the toolchain on PATH).
    static func swiftPath() -> String {
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") {
            let path = "\(directory)/swift"
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        return "/usr/bin/swift"
    }
}
