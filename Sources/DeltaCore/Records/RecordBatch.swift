/// A run of stored records in one contiguous buffer: what a store hands the HTTP layer per step.
///
/// Keeping bodies in one array (instead of one allocation per record) keeps streaming a
/// million-record collection cheap.
public struct RecordBatch: Sendable {
    /// The canonical bodies, back to back.
    public private(set) var bytes: [UInt8] = []
    private var ends: [Int] = []
    private var hiddenFlags: [Bool] = []

    /// Creates an empty batch with room for about `capacity` bytes.
    public init(capacity: Int = 0) {
        bytes.reserveCapacity(capacity)
    }

    /// The number of records in the batch.
    public var count: Int { ends.count }

    /// Whether the batch holds no records.
    public var isEmpty: Bool { ends.isEmpty }

    /// Appends one record's canonical body and hidden flag.
    public mutating func append(body: UnsafeRawBufferPointer, hidden: Bool) {
        bytes.append(contentsOf: body)
        ends.append(bytes.count)
        hiddenFlags.append(hidden)
    }

    /// Appends one record.
    public mutating func append(_ record: Record) {
        bytes.append(contentsOf: record.body)
        ends.append(bytes.count)
        hiddenFlags.append(record.hidden)
    }

    /// Calls `body` for each record with its canonical body bytes and hidden flag.
    public func forEach(_ body: (ArraySlice<UInt8>, Bool) throws -> Void) rethrows {
        var start = 0
        for (index, end) in ends.enumerated() {
            try body(bytes[start..<end], hiddenFlags[index])
            start = end
        }
    }
}
