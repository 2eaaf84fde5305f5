import DeltaClient
import DeltaCore
import Foundation

/// How `deltasnap sync` prints what it did.
enum SyncOutput {
    /// One line per event, for people.
    static func text(_ opened: OpenReport, _ report: SyncReport) -> String {
        var lines: [String] = []
        if let rebuilt = opened.rebuilt { lines.append("store rebuilt from the snapshot (\(rebuilt))") }
        if !opened.installed.isEmpty { lines.append("installed from the snapshot: \(opened.installed.joined(separator: ", "))") }
        let pushed = report.pushed
        if pushed.applied + pushed.unchanged + pushed.conflicts.count > 0 {
            lines.append("pushed: \(pushed.applied) applied, \(pushed.unchanged) unchanged, \(pushed.conflicts.count) conflicts")
        }
        for conflict in pushed.conflicts { lines.append("conflict: \(conflict.collection)/\(conflict.id): \(conflict.reason)") }
        // The error says what happened to the writes: kept queued, or turned down (a refused file).
        if let error = report.pushError { lines.append("push: \(error)") }
        for entry in report.collections {
            var line = "\(entry.collection): "
            if let reset = entry.reset { line += "reset to the snapshot (\(reset)), then " }
            switch entry.outcome {
            case .notModified: line += "not modified"
            case .applied(let upserted, let hidden): line += "applied a delta: \(upserted) upserted, \(hidden) hidden"
            case .replaced(let records): line += "replaced by the full dataset: \(records) records"
            case .resetDeferred(let reason, let until):
                line +=
                    "kept its data: it would reset again (\(reason)) so soon after the last reset; not before \(HTTPDate.format(UInt64(max(0, until.timeIntervalSince1970))))"
            case .signInRequired: line += "kept its data: the server gives it to signed-in users only (sync --token)"
            }
            lines.append(line + " (ETag \(entry.entityTag))")
        }
        return lines.joined(separator: "\n")
    }

    /// One JSON object, for scripts.
    static func json(_ opened: OpenReport, _ report: SyncReport) -> String {
        let collections: [JSONValue] = report.collections.map { entry in
            var members = [
                JSONMember(key: "etag", value: .string(entry.entityTag)),
                JSONMember(key: "name", value: .string(entry.collection)),
                JSONMember(key: "reset", value: entry.reset.map { .string($0.description) } ?? .null),
            ]
            switch entry.outcome {
            case .notModified:
                members.append(JSONMember(key: "outcome", value: .string("not-modified")))
            case .applied(let upserted, let hidden):
                members.append(JSONMember(key: "outcome", value: .string("applied")))
                members.append(JSONMember(key: "upserted", value: .number(String(upserted))))
                members.append(JSONMember(key: "hidden", value: .number(String(hidden))))
            case .replaced(let records):
                members.append(JSONMember(key: "outcome", value: .string("replaced")))
                members.append(JSONMember(key: "records", value: .number(String(records))))
            case .resetDeferred(let reason, let until):
                members.append(JSONMember(key: "outcome", value: .string("reset-deferred")))
                members.append(JSONMember(key: "deferredReset", value: .string(reason.description)))
                members.append(JSONMember(key: "until", value: .number(String(Int(until.timeIntervalSince1970)))))
            case .signInRequired:
                members.append(JSONMember(key: "outcome", value: .string("sign-in-required")))
            }
            return .object(members.sorted { $0.key < $1.key })
        }
        let pushed = JSONValue.object([
            JSONMember(key: "applied", value: .number(String(report.pushed.applied))),
            JSONMember(key: "conflicts", value: .array(report.pushed.conflicts.map(Conflicts.json))),
            JSONMember(key: "error", value: report.pushError.map { .string($0.description) } ?? .null),
            JSONMember(key: "unchanged", value: .number(String(report.pushed.unchanged))),
        ])
        let value = JSONValue.object([
            JSONMember(key: "collections", value: .array(collections)),
            JSONMember(key: "installed", value: .array(opened.installed.map { .string($0) })),
            JSONMember(key: "pushed", value: pushed),
            JSONMember(key: "rebuilt", value: opened.rebuilt.map { .string($0.description) } ?? .null),
        ])
        return String(decoding: value.canonicalBytes, as: UTF8.self)
    }

    /// The failure as one JSON object.
    static func json(error: ReplicaError) -> String {
        let value = JSONValue.object([
            JSONMember(key: "error", value: .string(error.description)),
            JSONMember(key: "kind", value: .string(error.kind.rawValue)),
            JSONMember(key: "retryAt", value: error.retryAt.map { .number(String(Int($0.timeIntervalSince1970.rounded(.up)))) } ?? .null),
            JSONMember(key: "transient", value: .bool(error.isTransient)),
        ])
        return String(decoding: value.canonicalBytes, as: UTF8.self)
    }
}
