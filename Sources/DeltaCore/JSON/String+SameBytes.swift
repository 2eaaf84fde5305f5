import Foundation

extension String {
    /// Whether the two strings hold the same UTF-8 bytes, as stores compare ids and JSON values
    /// compare strings (Swift's `==` is canonical equivalence: "é" precomposed equals "e" and
    /// U+0301): one `memcmp` where both have contiguous bytes.
    package func hasSameBytes(as other: String) -> Bool {
        let compared = utf8.withContiguousStorageIfAvailable { mine in
            other.utf8.withContiguousStorageIfAvailable { theirs in
                mine.count == theirs.count && (mine.isEmpty || memcmp(mine.baseAddress!, theirs.baseAddress!, mine.count) == 0)
            }
        }
        return compared.flatMap { $0 } ?? utf8.elementsEqual(other.utf8)
    }
}
