// swift-tools-version:6.1
// DeltaSnapshot: bake a dataset into an app bundle, serve deltas, apply them on the client.
import PackageDescription

/// Swift 6 language mode with strict concurrency for every target.
let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

/// The server's and the command line's dependencies (HTTP, PostgreSQL, JOSE, metrics, argument
/// parsing, logging, OpenAPI checks) come with the `Server` trait, on by default. An app that
/// depends on `DeltaClient` alone turns it off (`.package(url: …, from: …, traits: [])`): then
/// SwiftPM fetches none of them, only what the client builds (swift-crypto).
let server = TargetDependencyCondition.when(traits: ["Server"])

/// Product `name` of `package`, which comes with the `Server` trait (see `server`).
func serverProduct(_ name: String, _ package: String) -> Target.Dependency {
    .product(name: name, package: package, condition: server)
}

let package = Package(
    name: "DeltaSnapshot",
    // The client's floor (issue 23); LiveQuery and SyncStatus need Observation (iOS 17, macOS 14)
    // and say so with @available.
    platforms: [.macOS(.v13), .iOS(.v16), .watchOS(.v9), .tvOS(.v16), .visionOS(.v1)],
    products: [
        .library(name: "DeltaCore", targets: ["DeltaCore"]),
        .library(name: "DeltaStore", targets: ["DeltaStore"]),
        .library(name: "DeltaPostgres", targets: ["DeltaPostgres"]),
        .library(name: "DeltaServer", targets: ["DeltaServer"]),
        .library(name: "DeltaClient", targets: ["DeltaClient"]),
        .executable(name: "deltasnap", targets: ["deltasnap"]),
    ],
    traits: [
        .trait(name: "Server", description: "The server, the command line and their tests (off for an app that only needs DeltaClient)"),
        .default(enabledTraits: ["Server"]),
    ],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        // Already Hummingbird's: DeltaHTTP1Channel ends a connection's wait for its first routed request at shutdown.
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        // JSON Web Tokens (RFC 7515-7519) for users: signature checks by a maintained library, on swift-crypto.
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.8.0"),
        // SHA-256 where the CPU has no SHA-NI (DeltaCore); HMAC for tests' hand-made hostile tokens.
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        // `swift package generate-documentation --target DeltaClient` (Scripts/docs.sh): the DocC catalog.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
        // Tests only: reads docs/openapi.yaml to hold the served document and the routes to it.
        .package(url: "https://github.com/jpsim/Yams.git", from: "6.2.2"),
    ],
    targets: [
        // System libraries: SQLite from libsqlite3-dev, zlib from zlib1g-dev; on Apple platforms
        // both come with the SDK. No pkg-config name: on a Mac with Homebrew's zlib or SQLite,
        // pkg-config would point iOS Simulator builds at the Mac's headers and libraries.
        .systemLibrary(name: "CSQLite", path: "Sources/CSQLite", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CZlib", path: "Sources/CZlib", providers: [.apt(["zlib1g-dev"])]),

        // SHA-256 with the CPU's SHA instructions (x86 SHA-NI), chosen at run time by DeltaCore.
        .target(name: "CSHAExtensions", path: "Sources/CSHAExtensions"),
        // The wire format and nothing else: records, tokens, codecs, checksums, zlib streams.
        // swift-crypto hashes where the CPU has no SHA instructions the C target uses (ARM: iPhones).
        .target(
            name: "DeltaCore", dependencies: ["CZlib", "CSHAExtensions", .product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: strict),
        // What produces the wire format and only the server and the command line need: the gzip
        // compressor, the snapshot writer, the CSV reader. Apps' DeltaClient does not link it.
        .target(name: "DeltaAuthoring", dependencies: ["DeltaCore", "CZlib"], swiftSettings: strict),
        // The server's rules for users (docs/PROTOCOL.md, "Users and rules"): the rules file, claims,
        // rule filters and row sources. Apps' DeltaClient does not link it (it keeps the filter
        // language of selections, in DeltaCore).
        .target(name: "DeltaRules", dependencies: ["DeltaCore"], swiftSettings: strict),
        // A thin wrapper over the system SQLite, shared by the server's store and the client's replica.
        .target(name: "DeltaSQLite", dependencies: ["CSQLite"], swiftSettings: strict),
        // The server's change log: the `ChangeStore` seam by role, and the decisions every backend shares.
        .target(name: "DeltaStore", dependencies: ["DeltaCore", "DeltaRules", "DeltaSQLite"], swiftSettings: strict),
        // A Swift task executor on a SwiftNIO event loop: the HTTP layer runs a connection's
        // requests on its loop, and PostgreSQL's answers resume them there (`EventLoopExecutor`).
        .target(name: "DeltaEventLoops", dependencies: [serverProduct("NIOCore", "swift-nio")], swiftSettings: strict),
        // The SQLite backend of `ChangeStore`: one embedded database file, the default.
        .target(
            name: "DeltaSQLiteStore", dependencies: ["DeltaCore", "DeltaRules", "DeltaSQLite", "DeltaStore"],
            swiftSettings: strict),
        // The PostgreSQL backend of `ChangeStore`, so that several servers share one database.
        .target(
            name: "DeltaPostgres",
            dependencies: [
                "DeltaCore", "DeltaRules", "DeltaStore", "DeltaEventLoops",
                serverProduct("PostgresNIO", "postgres-nio"),
                serverProduct("Logging", "swift-log"),
                serverProduct("NIOConcurrencyHelpers", "swift-nio"),
                serverProduct("NIOPosix", "swift-nio"),
                serverProduct("NIOSSL", "swift-nio-ssl"),
            ],
            swiftSettings: strict
        ),
        // The HTTP layer: the only target that imports Hummingbird.
        .target(
            name: "DeltaServer",
            dependencies: [
                "DeltaCore", "DeltaAuthoring", "DeltaRules", "DeltaStore", "DeltaEventLoops",
                serverProduct("Hummingbird", "hummingbird"),
                serverProduct("HummingbirdCore", "hummingbird"),
                serverProduct("HTTPTypes", "swift-http-types"),
                serverProduct("Logging", "swift-log"),
                serverProduct("Prometheus", "swift-prometheus"),
                serverProduct("NIOCore", "swift-nio"),
                serverProduct("NIOConcurrencyHelpers", "swift-nio"),
                serverProduct("NIOHTTP1", "swift-nio"),
                serverProduct("NIOHTTPTypes", "swift-nio-extras"),
                serverProduct("NIOHTTPTypesHTTP1", "swift-nio-extras"),
                serverProduct("ServiceLifecycle", "swift-service-lifecycle"),
                serverProduct("JWTKit", "jwt-kit"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            // The console's script and style, compiled in as ConsoleAssets+Script.swift and
            // ConsoleAssets+Style.swift (Scripts/console-assets.sh writes them from these files).
            exclude: ["Console/Assets"],
            swiftSettings: strict
        ),
        // The client's replica: Foundation, SQLite and zlib only (Observation where the system has
        // it), so it builds for every Apple platform; no server module is compiled for it.
        .target(name: "DeltaClient", dependencies: ["DeltaCore", "DeltaSQLite"], swiftSettings: strict),
        // The command-line tool, one file per subcommand.
        .executableTarget(
            name: "deltasnap",
            dependencies: [
                "DeltaCore", "DeltaAuthoring", "DeltaRules", "DeltaSQLite", "DeltaStore", "DeltaSQLiteStore", "DeltaPostgres", "DeltaServer", "DeltaClient",
                serverProduct("ArgumentParser", "swift-argument-parser"),
                serverProduct("Logging", "swift-log"),
            ],
            swiftSettings: strict
        ),

        // The client API's latencies (live queries, typed queries, hashing): Scripts/bench-live.
        .executableTarget(
            name: "deltasnap-bench-live",
            dependencies: ["DeltaClient", "DeltaCore", "DeltaSQLite", .product(name: "Crypto", package: "swift-crypto")],
            path: "Benchmarks/ClientBench", swiftSettings: strict
        ),

        // Helpers shared by the test suites: seeded randomness, child processes, the store backends.
        .target(
            name: "DeltaTestSupport",
            dependencies: [
                "DeltaCore", "DeltaRules", "DeltaSQLite", "DeltaStore", "DeltaSQLiteStore", "DeltaPostgres",
                serverProduct("NIOCore", "swift-nio"), serverProduct("NIOPosix", "swift-nio"),
                serverProduct("PostgresNIO", "postgres-nio"), serverProduct("Logging", "swift-log"),
                serverProduct("Hummingbird", "hummingbird"), serverProduct("HummingbirdTesting", "hummingbird"),
            ],
            path: "Tests/DeltaTestSupport", swiftSettings: strict
        ),
        .testTarget(name: "DeltaCoreTests", dependencies: ["DeltaCore", "DeltaAuthoring", "DeltaTestSupport"], swiftSettings: strict),
        .testTarget(name: "DeltaRulesTests", dependencies: ["DeltaCore", "DeltaRules", "DeltaTestSupport"], swiftSettings: strict),
        .testTarget(
            name: "DeltaStoreTests",
            dependencies: [
                "DeltaCore", "DeltaRules", "DeltaStore", "DeltaSQLite", "DeltaSQLiteStore", "DeltaPostgres", "DeltaEventLoops", "DeltaTestSupport",
                serverProduct("NIOCore", "swift-nio"), serverProduct("NIOPosix", "swift-nio"),
            ],
            swiftSettings: strict),
        .testTarget(
            name: "DeltaServerTests",
            dependencies: [
                "DeltaCore", "DeltaAuthoring", "DeltaRules", "DeltaSQLite", "DeltaStore", "DeltaSQLiteStore", "DeltaServer", "DeltaTestSupport",
                serverProduct("Hummingbird", "hummingbird"),
                serverProduct("HummingbirdTesting", "hummingbird"),
                serverProduct("HTTPTypes", "swift-http-types"),
                serverProduct("NIOCore", "swift-nio"),
                serverProduct("NIOPosix", "swift-nio"),
                serverProduct("NIOEmbedded", "swift-nio"),
                serverProduct("NIOHTTP1", "swift-nio"),
                serverProduct("Yams", "Yams"),
                serverProduct("JWTKit", "jwt-kit"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "DeltaClientTests",
            dependencies: [
                "DeltaClient", "DeltaCore", "DeltaAuthoring", "DeltaRules", "DeltaStore", "DeltaSQLiteStore", "DeltaServer", "DeltaSQLite", "DeltaTestSupport",
                serverProduct("Hummingbird", "hummingbird"),
                serverProduct("HummingbirdTesting", "hummingbird"),
                serverProduct("HTTPTypes", "swift-http-types"),
                serverProduct("NIOCore", "swift-nio"),
            ],
            swiftSettings: strict
        ),
    ]
)
