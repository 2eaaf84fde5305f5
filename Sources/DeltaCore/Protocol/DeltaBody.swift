/// Writes a response body `{"<collection>":[record,record,…]}` record by record.
///
/// The same shape serves full datasets and deltas; which one a body is travels in the
/// `Delta-Mode` header (see docs/PROTOCOL.md). Collection names need no escaping.
public struct DeltaBodyWriter: Sendable {
    private var wroteRecord = false
    /// How many records have been appended.
    public private(set) var count = 0
    /// How many of them were hidden.
    public private(set) var hiddenCount = 0

    /// Starts a body, appending `{"<collection>":[` to `out`.
    public init(collection: CollectionName, into out: inout [UInt8]) {
        out.append(contentsOf: "{\"".utf8)
        out.append(contentsOf: collection.rawValue.utf8)
        out.append(contentsOf: "\":[".utf8)
    }

    /// Appends one record, from its stored canonical body.
    public mutating func append(body: some Collection<UInt8>, hidden: Bool, into out: inout [UInt8]) {
        if wroteRecord { out.append(UInt8(ascii: ",")) }
        wroteRecord = true
        Record.appendWire(body: body, hidden: hidden, to: &out)
        count += 1
        if hidden { hiddenCount += 1 }
    }

    /// Ends the body, appending `]}` to `out`.
    public func finish(into out: inout [UInt8]) {
        out.append(contentsOf: "]}".utf8)
    }
}
