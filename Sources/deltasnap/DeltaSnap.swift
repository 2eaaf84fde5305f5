import ArgumentParser

/// The `deltasnap` command: serve deltas, import data, bake snapshots, sync replicas.
@main
struct DeltaSnap: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "deltasnap",
        abstract: "Ship a dataset inside an app bundle and keep it fresh with tiny deltas.",
        discussion: """
            A server keeps collections of JSON records in a change log (a SQLite file by default). \
            Clients fetch GET /api/<collection> once, then send the token they got back \
            (If-None-Match / If-Modified-Since) and receive only what changed since.

            Start here:
              deltasnap import --db demo.sqlite --collection widgets \\
                Scripts/demo/widgets.json
              deltasnap serve --db demo.sqlite
              curl -i http://127.0.0.1:8080/api/widgets

            Keep a local replica in sync (what the DeltaClient library does in an app):
              deltasnap sync --store replica.sqlite \\
                --snapshot Snapshots/demo.snapshot --url http://127.0.0.1:8080/api
              deltasnap dump --store replica.sqlite --collection widgets

            The wire protocol is in docs/PROTOCOL.md.
            """,
        subcommands: [
            Serve.self, Import.self, Bake.self, Verify.self, Inspect.self, Sync.self, Dump.self, Query.self, Search.self,
            Put.self, Blob.self, Delete.self, Conflicts.self, Resolve.self, Status.self, Compact.self, TokenCommand.self, RulesCommand.self, Log.self,
            SignOut.self,
        ]
    )
}
