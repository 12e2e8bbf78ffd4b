// swift-tools-version:6.0
// libFuzzer targets for SessionVault's parsers. A separate package, so that the
// main build never links an executable without `main` (libFuzzer supplies it).
// Run with ../scripts/fuzz (see PLATFORM notes in docs/reliability.md).
import PackageDescription

// A path dependency's identity is its directory's name, whatever the clone is called.
let parent = String(Context.packageDirectory.split(separator: "/").dropLast().last ?? "main")
let fuzz: [SwiftSetting] = [.unsafeFlags(["-parse-as-library"])]

let package = Package(
    name: "SessionVaultFuzz",
    dependencies: [
        .package(path: ".."),
        // fuzz-jwt signs mutated headers and payloads with its fixed test keys.
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.8.0"),
    ],
    targets: [
        .executableTarget(name: "fuzz-frames", dependencies: [.product(name: "VaultProtocol", package: parent)], swiftSettings: fuzz),
        .executableTarget(name: "fuzz-plugin-messages", dependencies: [.product(name: "ExternalFactor", package: parent)], swiftSettings: fuzz),
        .executableTarget(name: "fuzz-config", dependencies: [.product(name: "DaemonConfig", package: parent)], swiftSettings: fuzz),
        .executableTarget(name: "fuzz-jwt", dependencies: [
            .product(name: "OIDCFactor", package: parent), .product(name: "VaultProtocol", package: parent),
            .product(name: "JWTKit", package: "jwt-kit"),
        ], swiftSettings: fuzz),
    ]
)
