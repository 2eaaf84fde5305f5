import DeltaCore
import Foundation
import HTTPTypes
import Hummingbird
import Logging

/// Signing in to the console with the owner's secret, and out.
extension Console {
    /// The sign-in form; a browser already signed in goes to the overview.
    func signInPage(_ request: Request) -> Response {
        if ConsoleHandler.session(request, sessions) != nil { return ConsoleResponse.redirect(to: "/console/overview") }
        return ConsolePage.signIn(message: nil)
    }

    /// Checks the secret a sign-in form gives (as the API checks a bearer secret, in constant
    /// time); a right one starts a session and goes to the overview, a wrong one is `401`, and
    /// after repeated failures an attempt is `429` until its wait is over (`SignInThrottle`).
    func signIn(_ request: Request) async throws -> Response {
        try ConsoleHandler.sameSite(request)
        // The whole form first: an attempt is decided and compared in one step, after its body.
        let form = try await ConsoleForm(request)
        let address = request.headers[PeerAddress.field] ?? "unknown"
        switch throttle.begin(address) {
        case .wait(let wait, let log):
            let seconds = max(1, Int(wait.components.seconds) + (wait.components.attoseconds > 0 ? 1 : 0))
            if log { logger.warning("console: sign-ins refused until a wait is over: too many wrong secrets", metadata: ["address": "\(address)"]) }
            return ConsolePage.signIn(
                message: "Too many wrong secrets: try again in \(seconds) s.", status: .tooManyRequests, headers: [.retryAfter: String(seconds)])
        case .compare:
            break
        }
        guard let secret = form.fields["secret"], Credential.isOwnerSecret(Array(secret.utf8), configuration) else {
            throttle.end(address, success: false)
            logger.warning("console: a sign-in gave a wrong secret", metadata: ["address": "\(address)"])
            return ConsolePage.signIn(message: "The secret is wrong.", status: .unauthorized)
        }
        throttle.end(address, success: true)
        let (cookie, _) = sessions.start()
        logger.notice("console: signed in", metadata: ["address": "\(address)"])
        var attributes = "Path=/console; HttpOnly; SameSite=Strict; Max-Age=\(Int(ConsoleSessions.lifetime.components.seconds))"
        if Self.cameOverTLS(request) { attributes += "; Secure" }
        return ConsoleResponse.redirect(to: "/console/overview", headers: [.setCookie: "\(ConsoleSessions.cookieName)=\(cookie); \(attributes)"])
    }

    /// Ends the session and goes to the sign-in page.
    func signOut(_ request: Request) -> Response {
        if let cookie = ConsoleHandler.cookie(request, sessions) { sessions.end(cookie) }
        logger.notice("console: signed out")
        return ConsoleResponse.redirect(
            to: "/console/sign-in", headers: [.setCookie: "\(ConsoleSessions.cookieName)=; Path=/console; HttpOnly; SameSite=Strict; Max-Age=0"])
    }

    /// Whether the request reached this server over TLS: through a proxy that says so
    /// (`X-Forwarded-Proto: https`, `Forwarded: proto=https`), since this server speaks plain HTTP.
    static func cameOverTLS(_ request: Request) -> Bool {
        if request.headers[HTTPField.Name("X-Forwarded-Proto")!]?.lowercased() == "https" { return true }
        return request.headers[HTTPField.Name("Forwarded")!]?.lowercased().contains("proto=https") == true || request.head.scheme == "https"
    }
}
