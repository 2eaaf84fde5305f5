// swift-tools-version:6.1
// An app's package that depends on DeltaClient alone: Scripts/consumer.sh copies it, points it at
// this repository, puts the README's library example in Sources/App/main.swift, and builds it
// (ConsumerPackageTests runs that script and checks what it fetched and compiled).
// The README's "In an app" section shows the same dependency, by URL.
import PackageDescription

let package = Package(
    name: "Consumer",
    platforms: [.macOS(.v13), .iOS(.v16), .watchOS(.v9), .tvOS(.v16), .visionOS(.v1)],
    // `traits: []`: without the Server trait, SwiftPM fetches none of the server's dependencies.
    dependencies: [.package(name: "DeltaSnapshot", path: "DELTASNAP_ROOT", traits: [])],
    targets: [
        .executableTarget(
            name: "App", dependencies: [.product(name: "DeltaClient", package: "DeltaSnapshot")],
            swiftSettings: [.unsafeFlags(["-warnings-as-errors"])])
    ]
)
