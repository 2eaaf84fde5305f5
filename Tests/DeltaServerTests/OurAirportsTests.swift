import DeltaAuthoring
import DeltaCore
import DeltaSQLite
import DeltaTestSupport
import Foundation
import Testing

/// The OurAirports dumps: `$DELTASNAP_OURAIRPORTS`, or `../shared/data/ourairports` beside the
/// clone. A user's fresh clone does not have them; the test is skipped then.
let ourAirports: String =
    ProcessInfo.processInfo.environment["DELTASNAP_OURAIRPORTS"]
    ?? URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().appendingPathComponent("shared/data/ourairports").path

@Suite("Real data: the first days of the OurAirports runways dumps")
struct OurAirportsTests {
    @Test(
        "each day imported with --replace changes exactly the rows that differ from the day before, and the same day twice changes nothing",
        .enabled(
            if: FileManager.default.fileExists(atPath: "\(ourAirports)/runways.tar.xz"),
            "no OurAirports data at ../shared/data/ourairports (set DELTASNAP_OURAIRPORTS to its folder)"))
    func firstDays() async throws {
        let directory = try makeTemporaryDirectory("deltasnap-ourairports")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let list = try ChildProcess(try requireProgram("tar", package: "tar"), ["-tJf", "\(ourAirports)/runways.tar.xz"])
        #expect(await list.stop(0, timeout: .seconds(120)) == 0)
        let names = list.printed.split(separator: "\n").map(String.init).filter { $0.hasSuffix(".csv") }.sorted().prefix(3)
        #expect(names.count == 3)
        let extract = try ChildProcess(try requireProgram("tar", package: "tar"), ["-xJf", "\(ourAirports)/runways.tar.xz", "-C", directory] + names)
        #expect(await extract.stop(0, timeout: .seconds(120)) == 0)
        let db = "\(directory)/runways.sqlite"
        var previous: [String: [UInt8]] = [:]
        for name in names {
            let file = "\(directory)/\(name)"
            let today = try await offThePool { try Self.records(file) }
            let changed = today.filter { previous[$0.key] != $0.value }.count
            let gone = previous.keys.filter { today[$0] == nil }.count
            let run = try ChildProcess(try deltasnapExecutable(), ["import", "--db", db, "--collection", "runways", "--replace", file])
            #expect(await run.stop(0, timeout: .seconds(120)) == 0)
            #expect(
                run.printed.hasPrefix(
                    "imported \(today.count) records into runways: \(changed) upserted, \(gone) hidden, \(today.count - changed) unchanged; "), "\(name)")
            let visible = try Connection(path: db).integer("SELECT count(*) FROM records WHERE collection = 'runways' AND hidden = 0")
            #expect(visible == Int64(today.count))
            previous = today
        }
        let again = try ChildProcess(try deltasnapExecutable(), ["import", "--db", db, "--collection", "runways", "--replace", "\(directory)/\(names.last!)"])
        #expect(await again.stop(0, timeout: .seconds(120)) == 0)
        #expect(again.printed.hasSuffix("; nothing changed, no commit\n"))
    }

    /// id → canonical body of every row of a CSV dump.
    static func records(_ file: String) throws -> [String: [UInt8]] {
        var reader = CSVRecordReader()
        reader.feed(Array(try Data(contentsOf: URL(fileURLWithPath: file))))
        reader.finish()
        var records: [String: [UInt8]] = [:]
        while let record = try reader.next() { records[record.id] = record.body }
        return records
    }
}
