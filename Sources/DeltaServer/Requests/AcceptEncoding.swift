import HTTPTypes

/// Whether `Accept-Encoding` allows gzip (RFC 9110 §12.5.3: `q=0` means "not acceptable").
func acceptsGzip(_ headers: HTTPFields) -> Bool {
    guard let value = headers[.acceptEncoding] else { return false }
    var gzip: Double?
    var wildcard: Double?
    for item in value.split(separator: ",") {
        let parts = item.split(separator: ";").map { String($0).trimmingWhitespace.lowercased() }
        guard let coding = parts.first, !coding.isEmpty else { continue }
        var quality = 1.0
        for parameter in parts.dropFirst() where parameter.hasPrefix("q=") {
            quality = Double(parameter.dropFirst(2)) ?? 0
        }
        if coding == "gzip" || coding == "x-gzip" { gzip = max(gzip ?? 0, quality) }
        if coding == "*" { wildcard = quality }
    }
    return (gzip ?? wildcard ?? 0) > 0
}

extension String {
    /// The string without leading and trailing spaces and tabs.
    var trimmingWhitespace: String {
        var slice = Substring(self)
        while let first = slice.first, first == " " || first == "\t" { slice = slice.dropFirst() }
        while let last = slice.last, last == " " || last == "\t" { slice = slice.dropLast() }
        return String(slice)
    }
}
