import DeltaClient
import DeltaCore
import DeltaSQLite
import DeltaTestSupport
import Foundation
import Testing

/// A model with an id of the app's own type, stored as a string.
struct NoteID: RawRepresentable, RecordIdentifier, Codable {
    var rawValue: String
}

/// A model keyed by `NoteID`.
struct Note: Codable, Sendable, Identifiable, Equatable {
    var id: NoteID
    var text: String
}

@Suite("Typed conflicts, discard, single-record observation, and a LiveQuery whose query changes")
struct TypedConflictTests {
    @Test("conflicts() as models; resolve(.merged(model)) sends the merge; discard drops a rejected write; a local delete's local is nil")
    func typedConflicts() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"a","text":"first"}"#, #"{"id":"b","text":"first"}"#)
            let snapshot = try await harness.bake("v1")
            let replica = try await Replica.open(harness.configuration(snapshot: snapshot))
            let notes = replica.collection(Note.self, named: items)
            try await notes.put(Note(id: NoteID(rawValue: "a"), text: "mine"))
            try await notes.delete(NoteID(rawValue: "b"))
            try await harness.put(#"{"id":"a","text":"theirs"}"#, #"{"id":"b","text":"theirs"}"#)
            #expect(try await replica.sync().pushed.conflicts.count == 2)
            let conflicts = try await notes.conflicts()
            #expect(conflicts.map(\.id) == ["a", "b"])
            #expect(conflicts[0].local == Note(id: NoteID(rawValue: "a"), text: "mine"))
            #expect(conflicts[0].server == Note(id: NoteID(rawValue: "a"), text: "theirs"))
            #expect(conflicts[0].reason == "changed" && !conflicts[0].isDenied)
            #expect(conflicts[1].local == nil)  // the app deleted it
            #expect(try await notes.rejected().isEmpty)
            try await notes.resolve(NoteID(rawValue: "a"), .merged(Note(id: NoteID(rawValue: "a"), text: "mine and theirs")))
            try await notes.discard(conflicts[1])
            #expect(try await notes.conflicts().isEmpty)
            #expect(try await replica.sync().pushed.applied == 1)
            #expect(try await harness.serverRecords() == ["a": #"{"id":"a","text":"mine and theirs"}"#, "b": #"{"id":"b","text":"theirs"}"#])
            #expect(try await notes.get(NoteID(rawValue: "b")) == Note(id: NoteID(rawValue: "b"), text: "theirs"))
        }
    }

    @Test("observe(id:) yields the model now, each change to it (a local put, a sync, a delete as nil), and nothing for other records")
    func observeOne() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"a","text":"one"}"#, #"{"id":"b","text":"other"}"#)
            let replica = try await Replica.open(harness.configuration(snapshot: try await harness.bake("v1")))
            let notes = replica.collection(Note.self, named: items)
            let seen = Locked([String]())
            let watch = Task {
                for try await note in notes.observe(id: NoteID(rawValue: "a")) { seen.withLock { $0.append(note?.text ?? "nil") } }
            }
            defer { watch.cancel() }
            #expect(try await eventually { seen.withLock { $0 } == ["one"] })
            try await notes.put(Note(id: NoteID(rawValue: "b"), text: "other, edited"))
            try await notes.put(Note(id: NoteID(rawValue: "a"), text: "two"))
            #expect(try await eventually { seen.withLock { $0 } == ["one", "two"] })
            #expect(try await replica.sync().pushed.applied == 2)
            try await harness.put(#"{"id":"a","text":"three"}"#)
            try await replica.sync()
            #expect(try await eventually { seen.withLock { $0 } == ["one", "two", "three"] })
            try await notes.delete(NoteID(rawValue: "a"))
            #expect(try await eventually { seen.withLock { $0 } == ["one", "two", "three", "nil"] })
        }
    }

    @Test("A LiveQuery holds its result when init returns; changing its query shows the new result at once and follows it, never empty between")
    func changingQuery() async throws {
        guard #available(macOS 14, iOS 17, tvOS 17, watchOS 10, *) else { return }
        try await withHarness { harness in
            try await harness.put(#"{"id":"a","text":"apple"}"#, #"{"id":"b","text":"banana"}"#, #"{"id":"c","text":"cherry"}"#)
            let replica = try await Replica.open(harness.configuration(snapshot: try await harness.bake("v1")))
            let notes = replica.collection(Note.self, named: items)
            try await MainActor.run {
                let live = LiveQuery(notes, order: [.ascending("text")])
                // Loaded before the first frame: no empty list, no wait.
                #expect(live.isLoaded)
                #expect(live.elements.map(\.text) == ["apple", "banana", "cherry"])
                live.query.filter = .compare(member: "text", .gte, .string("b"))
                #expect(live.elements.map(\.text) == ["banana", "cherry"])
                live.query.limit = 1
                #expect(live.elements.map(\.text) == ["banana"])
                #expect(live.error == nil)
                _ = try #require(live.query.filter)
            }
            let live = await MainActor.run { LiveQuery(notes, filter: .compare(member: "text", .gte, .string("b")), order: [.ascending("text")]) }
            // The new query is followed: a later write shows.
            try await notes.put(Note(id: NoteID(rawValue: "d"), text: "date"))
            #expect(try await eventually { await MainActor.run { live.elements.map(\.text) } == ["banana", "cherry", "date"] })
            await MainActor.run { live.query.filter = .compare(member: "text", .lt, .string("c")) }
            #expect(await MainActor.run { live.elements.map(\.text) } == ["apple", "banana"])
            try await notes.put(Note(id: NoteID(rawValue: "e"), text: "avocado"))
            #expect(try await eventually { await MainActor.run { live.elements.map(\.text) } == ["apple", "avocado", "banana"] })
        }
    }
}
