import ArgumentParser
import DeltaClient
import DeltaSQLite
import Foundation

/// `deltasnap sign-out`: the user's rows and writes leave the replica.
struct SignOut: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sign-out",
        abstract: "Sign the user out of a replica: the collections the server's rules restrict go back to the snapshot, the outbox is emptied.",
        discussion: """
            Public collections are kept. Refuses while local writes are not settled, unless \
            --discard-pending: queued writes (deltasnap sync sends them), conflicts and denied \
            writes (deltasnap conflicts lists them; deltasnap resolve --keep server drops one). Safe against \
            a kill at any moment: the next open of the store finishes it before anything is read.
              deltasnap sign-out --store app.sqlite
            """)

    @OptionGroup var local: LocalStore

    @Option(help: ArgumentHelp("The bundled snapshot (default: the one the store was last opened with).", valueName: "file"))
    var snapshot: String?

    @Flag(help: "Sign out even though local writes are not on the server: they are lost.")
    var discardPending = false

    func run() async throws {
        _ = try local.files()
        let recorded = try Connection(path: local.store, mode: .readOnly).text("SELECT value FROM sync_state WHERE key = 'snapshot'")
        guard let path = snapshot ?? recorded else { throw CommandFailure("\(local.store): no snapshot recorded; give --snapshot FILE") }
        // The server is never contacted by a sign-out.
        let configuration = ReplicaConfiguration(
            storeURL: URL(fileURLWithPath: local.store), snapshotURL: URL(fileURLWithPath: path), serverURL: URL(string: "http://127.0.0.1/api")!)
        do {
            let replica = try await Replica.open(configuration)
            try await replica.signOut(discardingPendingWrites: discardPending)
        } catch let error as ReplicaError where error.kind == .configuration {
            // The replica's advice names its API (discard, resolve): here, the commands.
            throw CommandFailure(
                "sign-out: \(Self.commandLine(error.reason)) (\(error.evidence ?? ""))")
        } catch let error as ReplicaError {
            throw CommandFailure("sign-out: \(error)")
        }
        print("signed out of \(local.store)")
    }

    /// The replica's advice in the command line's words: its commands and options, not the API's.
    static func commandLine(_ advice: String) -> String {
        advice.replacingOccurrences(of: "(discard, resolve)", with: "(deltasnap resolve --keep server)")
            .replacingOccurrences(of: "(resolve)", with: "(deltasnap resolve)")
            .replacingOccurrences(of: "(sync sends them)", with: "(deltasnap sync sends them)")
            .replacingOccurrences(of: "; or sign out discarding them", with: "; or sign-out --discard-pending")
    }
}
