import Hummingbird

/// The console's script and style, compiled into the binary: no CDN, no external font or script,
/// so the console works offline and behind a firewall. Both are code, not data, and are served
/// without a session (the sign-in page uses the style).
enum ConsoleAssets {
    /// `GET /console/console.js`.
    static func script() -> Response { asset(scriptText, type: "text/javascript; charset=utf-8") }

    /// `GET /console/console.css`.
    static func style() -> Response { asset(styleText, type: "text/css; charset=utf-8") }

    /// `GET /console/icon.svg`: the pages' icon.
    static func icon() -> Response {
        asset(
            ##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" fill="#2f5fc4"/><path d="M4 11 8 4l4 7z" fill="#fff"/></svg>"##,
            type: "image/svg+xml")
    }

    private static func asset(_ text: String, type: String) -> Response {
        Response(status: .ok, headers: [.contentType: type, .cacheControl: "no-cache"], body: .init(byteBuffer: ByteBuffer(string: text)))
    }
}
