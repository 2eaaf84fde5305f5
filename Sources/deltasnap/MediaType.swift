/// A media type for a file, from its extension: what `put --attach` uses without `--type`.
enum MediaType {
    /// The usual type of `path`'s extension, `application/octet-stream` when unknown.
    static func guess(_ path: String) -> String {
        let name = path.split(separator: "/").last.map(String.init) ?? path
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return "application/octet-stream" }
        return known[name[name.index(after: dot)...].lowercased()] ?? "application/octet-stream"
    }

    private static let known: [String: String] = [
        "jpg": "image/jpeg", "jpeg": "image/jpeg", "png": "image/png", "gif": "image/gif", "webp": "image/webp", "heic": "image/heic",
        "svg": "image/svg+xml", "pdf": "application/pdf", "txt": "text/plain", "json": "application/json", "csv": "text/csv",
        "mp4": "video/mp4", "mov": "video/quicktime", "mp3": "audio/mpeg", "m4a": "audio/mp4", "zip": "application/zip",
    ]
}
