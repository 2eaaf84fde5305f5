/// Literals for JSON values, so that filters read as they would in JSON:
/// `.compare(member: "price", .lt, 10)`, `.compare(member: "color", .eq, "red")`.
extension JSONValue: ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral, ExpressibleByStringLiteral, ExpressibleByBooleanLiteral {
    /// An integer, as JSON writes it.
    public init(integerLiteral value: Int) { self = .number(String(value)) }
    /// A number, as Swift prints it (the shortest text that reads back as the same `Double`).
    public init(floatLiteral value: Double) { self = .number("\(value)") }
    /// A string.
    public init(stringLiteral value: String) { self = .string(value) }
    /// `true` or `false`.
    public init(booleanLiteral value: Bool) { self = .bool(value) }
}
