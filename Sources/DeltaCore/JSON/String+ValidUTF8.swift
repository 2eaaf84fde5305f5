extension String {
    /// The text of `bytes` when they are valid UTF-8, else nil: what `String(validating:as:)`
    /// does, which needs iOS 18 and macOS 15, above the package's floor. Decoding replaces every
    /// ill-formed sequence with U+FFFD, so the bytes are valid exactly when the text's UTF-8 is
    /// the bytes themselves.
    init?(validUTF8 bytes: some Collection<UInt8>) {
        let text = String(decoding: bytes, as: UTF8.self)
        guard text.utf8.elementsEqual(bytes) else { return nil }
        self = text
    }
}
