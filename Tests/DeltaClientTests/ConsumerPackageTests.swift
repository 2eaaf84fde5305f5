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

        // Scripts/consumer.sh writes the package (the example as its main.swift) and builds it,
        // in .build/consumer: Scripts/test.sh built it once before the tests, so this rebuilds
        // only what changed since. Files an earlier build left there can only fail the checks below.
        let directory = Self.root.appendingPathComponent(".build/consumer").path
        let child = try ChildProcess(Self.root.appendingPathComponent("Scripts/consumer.sh").path, [directory])
        let status = await child.stop(0, timeout: .seconds(900))
        let printed = child.printed
        #expect(status == 0, "Scripts/consumer.sh failed: \(printed.suffix(3000))")
        let main = try String(contentsOfFile: "\(directory)/Sources/App/main.swift", encoding: .utf8)
        #expect(main == example, "Scripts/consumer.sh built another example than the README's")
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
}
