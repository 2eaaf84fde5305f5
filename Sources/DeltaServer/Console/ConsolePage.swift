import Foundation
import HTTPTypes
import Hummingbird

/// The console's pages: HTML shells, the same for every session but for its CSRF token, which
/// the console's script (`ConsoleAssets`) fills from the console's JSON. No inline script or
/// style: the pages' `Content-Security-Policy` allows none.
enum ConsolePage: String, CaseIterable, Sendable {
    case overview, collection, record, users, activity, actions

    /// The page's title.
    var title: String {
        switch self {
        case .overview: "Overview"
        case .collection: "Collection"
        case .record: "Record"
        case .users: "Users"
        case .activity: "Activity"
        case .actions: "Actions"
        }
    }

    /// The pages the navigation names.
    static let navigation: [ConsolePage] = [.overview, .users, .activity, .actions]

    /// The page for a signed-in session.
    static func render(_ page: ConsolePage, session: ConsoleSessions.Session, request: Request? = nil) -> Response {
        let links = navigation.map { item in
            "<a href=\"/console/\(item.rawValue)\"\(item == page ? " aria-current=\"page\"" : "")>\(item.title)</a>"
        }.joined()
        let body = """
            <header><strong class="brand">DeltaSnapshot</strong><nav>\(links)</nav>\
            <form method="post" action="/console/sign-out"><input type="hidden" name="csrf" value="\(escape(session.csrf))">\
            <button type="submit">Sign out</button></form></header>
            <main id="main" data-page="\(page.rawValue)"><p class="quiet">Loading…</p></main>
            """
        return ConsoleResponse.html(document(title: page.title, csrf: session.csrf, body: body))
    }

    /// The sign-in page, with a message after a refused attempt.
    static func signIn(message: String?, status: HTTPResponse.Status = .ok, headers: HTTPFields = [:]) -> Response {
        let note = message.map { "<p class=\"error\" role=\"alert\">\(escape($0))</p>" } ?? ""
        let body = """
            <main class="sign-in"><h1>DeltaSnapshot console</h1>\(note)
            <form method="post" action="/console/sign-in">
            <input type="text" name="username" value="owner" autocomplete="username" hidden>
            <label for="secret">The owner's secret (the server's write token)</label>
            <input id="secret" name="secret" type="password" autocomplete="current-password" required autofocus>
            <button type="submit">Sign in</button>
            </form></main>
            """
        return ConsoleResponse.html(document(title: "Sign in", csrf: nil, body: body), status: status, headers: headers)
    }

    private static func document(title: String, csrf: String?, body: String) -> String {
        """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
        <title>\(escape(title)) · DeltaSnapshot console</title>
        \(csrf.map { "<meta name=\"csrf-token\" content=\"\(escape($0))\">" } ?? "")
        <link rel="icon" href="/console/icon.svg"><link rel="stylesheet" href="/console/console.css"><script src="/console/console.js" defer></script></head>
        <body>
        \(body)
        </body></html>

        """
    }

    /// `text` safe inside HTML text and double-quoted attributes.
    static func escape(_ text: String) -> String {
        var escaped = ""
        for character in text {
            switch character {
            case "&": escaped += "&amp;"
            case "<": escaped += "&lt;"
            case ">": escaped += "&gt;"
            case "\"": escaped += "&quot;"
            case "'": escaped += "&#39;"
            default: escaped.append(character)
            }
        }
        return escaped
    }
}
