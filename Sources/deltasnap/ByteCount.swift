/// The bytes a size on the command line names: a number of bytes, or one with `KiB`, `MiB` or
/// `GiB` (`256MiB`, `1GiB`); nil when it is not a size or does not fit.
func byteCount(_ text: String) -> Int64? {
    let units: [(String, Int64)] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10), ("", 1)]
    for (suffix, scale) in units where text.hasSuffix(suffix) {
        guard let number = Int64(text.dropLast(suffix.count)), number >= 0 else { return nil }
        let (bytes, overflow) = number.multipliedReportingOverflow(by: scale)
        return overflow ? nil : bytes
    }
    return nil
}
