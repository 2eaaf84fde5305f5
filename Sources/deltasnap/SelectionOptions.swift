import ArgumentParser
import DeltaCore
import Foundation

/// `sync --filter COLLECTION=JSON --limit COLLECTION=N`, and what `--url` may be.
struct SelectionOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "Hold only the records of COLLECTION that match JSON (repeat per collection), e.g. widgets='{\"color\":{\"eq\":\"red\"}}'; see docs/PROTOCOL.md, Selections.",
            valueName: "collection=json"))
    var filter: [String] = []

    @Option(help: ArgumentHelp("Hold at most N records of COLLECTION: the first N that match, in id order (repeat per collection).", valueName: "collection=n"))
    var limit: [String] = []

    @Option(
        help: ArgumentHelp(
            "Index MEMBER of COLLECTION for deltasnap query: eq, in and ranges on it, and --order-by it with --limit (repeat per member).",
            valueName: "collection=member"))
    var index: [String] = []

    @Option(
        help: ArgumentHelp(
            "Index two members of COLLECTION together, for a query that requires one value of the first and is ordered by the second with --limit, e.g. items=category,price (repeat per index).",
            valueName: "collection=first,second"))
    var compoundIndex: [String] = []

    @Option(
        help: ArgumentHelp(
            "Make COLLECTION searchable with deltasnap search: all its string members, or only those listed (COLLECTION=name,city).",
            valueName: "collection[=members]"))
    var search: [String] = []

    /// The `--index` settings, by collection.
    func indexes() throws -> [String: [String]] {
        var found: [String: [String]] = [:]
        for value in index {
            let parts = value.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, !parts[1].isEmpty else { throw CommandFailure("--index: expected COLLECTION=MEMBER (got \(String(reflecting: value)))") }
            _ = try CollectionName(parts[0])
            found[parts[0], default: []].append(parts[1])
        }
        return found
    }

    /// The `--compound-index` settings, by collection.
    func compoundIndexes() throws -> [String: [[String]]] {
        var found: [String: [[String]]] = [:]
        for value in compoundIndex {
            let parts = value.split(separator: "=", maxSplits: 1).map(String.init)
            let members = parts.count == 2 ? parts[1].split(separator: ",", omittingEmptySubsequences: false).map(String.init) : []
            guard members.count == 2, !members.contains(""), members[0] != members[1] else {
                throw CommandFailure("--compound-index: expected COLLECTION=FIRST,SECOND, two different members (got \(String(reflecting: value)))")
            }
            _ = try CollectionName(parts[0])
            found[parts[0], default: []].append(members)
        }
        return found
    }

    /// The `--search` settings, by collection (an empty list: all string members).
    func searchable() throws -> [String: [String]] {
        var found: [String: [String]] = [:]
        for value in search {
            let parts = value.split(separator: "=", maxSplits: 1).map(String.init)
            _ = try CollectionName(parts[0])
            found[parts[0]] = parts.count == 2 ? parts[1].split(separator: ",").map(String.init) : []
        }
        return found
    }

    /// The selection per collection; `fromURL` adds the one a collection URL's query names.
    func selections(adding fromURL: (collection: String, selection: Selection)?) throws -> [String: Selection] {
        var filters: [String: String] = [:]
        var limits: [String: String] = [:]
        for (option, values) in [("--filter", filter), ("--limit", limit)] {
            for value in values {
                guard let equals = value.firstIndex(of: "="), equals > value.startIndex else {
                    throw CommandFailure("\(option): expected COLLECTION=VALUE (got \(String(reflecting: value)))")
                }
                let name = String(value[..<equals])
                let rest = String(value[value.index(after: equals)...])
                _ = try CollectionName(name)
                if option == "--filter" { filters[name] = rest } else { limits[name] = rest }
            }
        }
        var selections: [String: Selection] = [:]
        if let fromURL { selections[fromURL.collection] = fromURL.selection }
        for name in Set(filters.keys).union(limits.keys) {
            guard fromURL?.collection != name else {
                throw CommandFailure("--filter/--limit: \(name) already has its selection in --url; give it in one place")
            }
            do {
                selections[name] = try Selection(filter: filters[name], limit: limits[name])
            } catch let error as WireError {
                throw CommandFailure("--filter/--limit \(name): \(error)")
            }
        }
        return selections
    }
}

/// What `sync --url` names: the API root (`http://HOST:PORT/api`), or one collection's URL
/// (`http://HOST:PORT/api/widgets`, optionally with `?filter=…&limit=…`).
struct ServerAddress {
    /// The API root.
    let root: URL
    /// The collection a collection URL names, with the selection its query asks for.
    let collection: (name: String, selection: Selection)?

    init(_ text: String) throws {
        let expected = "expected the API root (http://HOST:PORT/api) or a collection URL (http://HOST:PORT/api/COLLECTION)"
        guard var components = URLComponents(string: text), let scheme = components.scheme?.lowercased(), ["http", "https"].contains(scheme),
            components.host?.isEmpty == false
        else { throw CommandFailure("--url: \(expected) (got \(String(reflecting: text)))") }
        let parts = components.path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        let items = components.queryItems ?? []
        components.query = nil
        if parts.last == "api" {
            guard items.isEmpty else {
                throw CommandFailure(
                    "--url: the API root takes no query; put filter and limit on a collection URL or use --filter/--limit (got \(String(reflecting: text)))")
            }
            root = components.url!
            collection = nil
        } else if parts.count >= 2, parts[parts.count - 2] == "api" {
            let name = parts[parts.count - 1]
            guard (try? CollectionName(name)) != nil else { throw CommandFailure("--url: \(String(reflecting: name)) is not a collection name; \(expected)") }
            let unknown = items.map(\.name).filter { $0 != "filter" && $0 != "limit" }
            guard unknown.isEmpty else {
                throw CommandFailure("--url: a collection URL takes only filter and limit in its query (got \(unknown.joined(separator: ", ")))")
            }
            do {
                let selection = try Selection(filter: items.first { $0.name == "filter" }?.value, limit: items.first { $0.name == "limit" }?.value)
                collection = (name, selection)
            } catch let error as WireError {
                throw CommandFailure("--url: \(error)")
            }
            components.path = "/" + parts.dropLast().joined(separator: "/")
            root = components.url!
        } else {
            throw CommandFailure("--url: \(expected) (got \(String(reflecting: text)); the server answers GET /api/COLLECTION)")
        }
    }
}
