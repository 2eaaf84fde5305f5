import DeltaCore
import Foundation
import Hummingbird

/// The `{collection}` path segment, percent-decoded and validated.
func collectionName(_ context: some RequestContext) throws -> CollectionName {
    try CollectionName(decoded(context.parameters.require("collection"), what: "collection name"))
}

/// The `{id}` path segment, percent-decoded and validated as a record id.
func recordID(_ context: some RequestContext) throws -> String {
    let id = try decoded(context.parameters.require("id"), what: "record id")
    try Record.validate(id: id)
    return id
}

/// Hummingbird hands path parameters over still percent-encoded.
private func decoded(_ raw: String, what: String) throws -> String {
    guard let text = raw.removingPercentEncoding else {
        throw Problem.badRequest("invalid-path", "\(what): invalid percent-encoding in the path (\(String(reflecting: raw)))")
    }
    return text
}
