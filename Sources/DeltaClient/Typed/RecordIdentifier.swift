import Foundation

/// What a model's `id` may be: a value the record's `"id"` holds as a JSON string, which is what
/// the protocol stores. `String` and `UUID` are; so is any `RawRepresentable` with a `String`
/// raw value (an app's `NoteID`). An `Int` id is not: its JSON is a number, not a record id.
public protocol RecordIdentifier: Hashable, Sendable {
    /// The record id: the string the record's `"id"` holds.
    var recordID: String { get }
}

extension String: RecordIdentifier {
    /// The string itself.
    public var recordID: String { self }
}

extension UUID: RecordIdentifier {
    /// `uuidString` (upper case), as `JSONEncoder` writes a `UUID`. Records made elsewhere with
    /// lower-case ids decode, but are not found by these ids: give such a model a `String` id.
    public var recordID: String { uuidString }
}

extension RecordIdentifier where Self: RawRepresentable, RawValue == String {
    /// The raw value, as `JSONEncoder` writes the id.
    public var recordID: String { rawValue }
}
