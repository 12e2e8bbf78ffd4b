// swift-tools-version:6.0
// SessionVault: a per-user session vault for desktop Linux.
//
// Dependency arrows point one way:
//   vaultd / vaultctl  ->  VaultServer / VaultClient  ->  VaultCore  ->  VaultStore, Keyring, SodiumKit
//   Plugins/*          ->  VaultFactor (the plugin interface)  ->  SodiumKit
// The composition root (VaultdProgram) is the only place that knows the concrete factors.
// The vaultd binary is vaultd and vault-fpstub (Sources/vaultd/main.swift); vaultctl is
// its own small static executable.
import PackageDescription

let strict: [SwiftSetting] = [.enableUpcomingFeature("ExistentialAny")]

// How vaultd is linked in a release build: by lld, with relative relocations
// packed (DT_RELR, glibc >= 2.36: Debian 12 has 2.36) and without exporting
// every symbol (the static Swift runtime's link arguments ask for
// --export-dynamic): fewer relocation records and symbol tables for the loader
// to read at every start, of vaultd and of vaultctl, which is the same binary
// (docs/benchmarks.md). Nothing in it imports Foundation, so lld finds no
// Foundation archive to take a shared symbol from (which once dragged ICU's
// data in). Debug and sanitizer builds link as SwiftPM does.
let vaultdRelease: [LinkerSetting] = [
    .unsafeFlags(["-use-ld=lld", "-Xlinker", "--no-export-dynamic", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs"],
                 .when(configuration: .release)),
]

// How vaultctl is linked in a release build: one static, position-independent
// executable (static-pie: still loaded at a random address), glibc and the
// Swift runtime inside it. It loads no shared library, so the dynamic loader
// has nothing to find, map or bind: it starts in about half a millisecond,
// where the same code inside vaultd's binary took 3.4 ms (docs/benchmarks.md,
// session 20). It links no Foundation and calls no libc function that loads
// an NSS module (no user or host name lookups), which static glibc could not
// do safely.
let vaultctlRelease: [LinkerSetting] = [
    .unsafeFlags(["-static-executable", "-use-ld=lld", "-Xclang-linker", "-static-pie", "-Xlinker", "--no-export-dynamic",
                  "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs"],
                 .when(configuration: .release)),
]

// Fuzz targets: built by scripts/fuzz with `-D FUZZING` and libFuzzer, which
// supplies `main` and calls each target's `LLVMFuzzerTestOneInput`; in every
// other build they are small programs that replay corpus files through the
// same entry (Fuzz/Sources/FuzzReplay). Being in this package, they reach
// internal targets without making them products.
let fuzzTarget: (String, [Target.Dependency]) -> Target = { name, dependencies in
    .executableTarget(name: name, dependencies: ["FuzzReplay"] + dependencies, path: "Fuzz/Sources/\(name)", swiftSettings: strict)
}

let package = Package(
    name: "SessionVault",
    // No `platforms`: SessionVault runs on Linux only (systemd user units, the Secret
    // Service, SO_PEERCRED), and SwiftPM has no Linux entry for that list: Linux
    // builds take their minimum from the toolchain, not from here.
    products: [
        .executable(name: "vaultd", targets: ["vaultd"]),
        .executable(name: "vaultctl", targets: ["vaultctl"]),
        .executable(name: "vault-bench", targets: ["vault-bench"]),
        // The two libraries outside authors build on: app authors on VaultClient
        // (clients/swift has an example), factor plugin authors on VaultFactor.
        .library(name: "VaultClient", targets: ["VaultClient"]),
        .library(name: "VaultFactor", targets: ["VaultFactor"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.81.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.6.0"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift.git", from: "0.2.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.21.0"),
        // Only for the tests and fuzz-jwt: an independent implementation that mints
        // the tokens our own ID-token check (OIDCToken, over swift-crypto) verifies.
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.8.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.0.0"),
    ],
    targets: [
        // C libraries from apt, found through pkg-config.
        .systemLibrary(name: "CSodium", pkgConfig: "libsodium", providers: [.apt(["libsodium-dev"])]),
        .systemLibrary(name: "CSecret", pkgConfig: "libsecret-1", providers: [.apt(["libsecret-1-dev"])]),
        // GDBus, for talking to fprintd on the system bus (GLib/GIO come with libsecret anyway).
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CGIO", pkgConfig: "gio-2.0", providers: [.apt(["libglib2.0-dev"])]),
        // The GIO, GLib, libsecret, libsodium and SQLite functions SessionVault calls,
        // loading each library on first use: vaultctl (the same binary as vaultd) loads none.
        // The TPM 2.0 software stack (ESAPI, its TCTI loader and marshalling), for keys bound to this computer.
        .systemLibrary(name: "CTSS2", pkgConfig: "tss2-esys", providers: [.apt(["libtss2-dev"])]),
        .target(name: "LibrariesOnDemand", dependencies: ["CGIO", "CSecret", "CSodium", "CSQLite", "CTSS2"]),

        // One C wrapper for prctl(2), which is variadic and so not callable from Swift.
        .target(name: "CVaultShims"),

        // `Locked`: a value behind a pthread mutex, which ThreadSanitizer can see
        // (the standard library's Mutex is a futex it cannot; Locked.swift says why).
        .target(name: "Locking", swiftSettings: strict),

        // Thin, safe wrappers over libsodium: secure memory, AEAD, KDF, Argon2id.
        .target(name: "SodiumKit", dependencies: ["CSodium", "LibrariesOnDemand"], swiftSettings: strict),

        // Sealing a secret in the TPM behind an auth value (C, over ESAPI), and the
        // `SecretChip` the broker binds its wraps to (docs/key-hierarchy.md).
        .target(name: "TPMSeal", dependencies: ["CTSS2", "LibrariesOnDemand"]),
        .target(name: "SecurityChip", dependencies: ["TPMSeal", "SodiumKit"], swiftSettings: strict),

        // The plugin interface: the only SessionVault module a factor plugin depends on
        // (besides Locking, a leaf with one lock type in it).
        .target(name: "VaultFactor", dependencies: ["SodiumKit", "VaultProtocol"], swiftSettings: strict),

        // Wire types shared by server and clients: envelope, error codes, en/nb messages.
        .target(name: "VaultProtocol", swiftSettings: strict),
        // The wire: envelope, prompts, events, limits. Only the server and the
        // clients import it; the broker, factors, keyring and plugins cannot.
        .target(name: "VaultWire", dependencies: ["VaultProtocol"], swiftSettings: strict),

        // SQLite persistence of opaque sealed blobs, keyslots, counters, audit, over
        // SQLite's C API (SQLite.swift in it: no Foundation, so no ICU in vaultd).
        .target(name: "VaultStore", dependencies: ["CSQLite", "LibrariesOnDemand", "Locking"], swiftSettings: strict),

        // The device key in the Secret Service (libsecret), or an explicit 0600 file.
        .target(name: "Keyring", dependencies: ["CSecret", "LibrariesOnDemand", "SodiumKit", "VaultProtocol"], swiftSettings: strict),

        // The broker: lock state, keyslots, unlock policy, sealed sessions, audit.
        .target(name: "VaultCore", dependencies: [
            "Locking", "SecurityChip", "SodiumKit", "VaultFactor", "VaultProtocol", "VaultStore", "Keyring",
            .product(name: "Logging", package: "swift-log"),
        ], swiftSettings: strict),

        // Cutting a connection's bytes into request lines, with the 64 KiB limit (fuzzed by fuzz-frames).
        .target(name: "LineFraming", dependencies: [
            "CVaultShims", "VaultWire", .product(name: "NIOCore", package: "swift-nio"),
        ], swiftSettings: strict),

        // The Unix-socket NDJSON server in front of the broker.
        .target(name: "VaultServer", dependencies: [
            "CVaultShims", "LineFraming", "Locking", "VaultCore", "VaultProtocol", "VaultWire", "VaultFactor",
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "Logging", package: "swift-log"),
        ], swiftSettings: strict),

        // vaultd's own dialogs through pinentry (Assuan), for clients that say `"prompter": "vault"`.
        .target(name: "Prompter", dependencies: [
            "CVaultShims", "Locking", "SodiumKit", "VaultCore", "VaultFactor", "VaultProtocol",
            .product(name: "Logging", package: "swift-log"),
        ], swiftSettings: strict),

        // A small blocking client for Swift programs (vaultctl, the benchmark).
        .target(name: "VaultClient", dependencies: ["VaultProtocol", "VaultWire", "CVaultShims", "Locking"], swiftSettings: strict),

        // Norwegian national identity numbers: validation, kind, birth date, masking, keyed hash.
        .target(name: "NationalID", dependencies: ["SodiumKit"], swiftSettings: strict),

        // Keeps the member record's national identity number in step with what logins say:
        // registry backends (HTTP, SQLite demo), durable retry queue in the store, conflicts, org context.
        .target(name: "MemberSync", dependencies: [
            "NationalID", "VaultStore", "VaultProtocol", "SodiumKit", "CSQLite",
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
        ], swiftSettings: strict),

        // Unlock factors, one target each.
        .target(name: "PINFactor", dependencies: ["VaultFactor"], path: "Plugins/PINFactor", swiftSettings: strict),
        .target(name: "FingerprintFactor", dependencies: ["VaultFactor", "CGIO", "LibrariesOnDemand", "Locking"], path: "Plugins/FingerprintFactor", swiftSettings: strict),
        // External factors: `vault-factor-NAME` executables speaking JSON lines (docs/plugins.md).
        .target(name: "ExternalFactor", dependencies: ["VaultFactor", "Locking"], path: "Plugins/ExternalFactor", swiftSettings: strict),

        // vaultd's config file and paths, in a library so the fuzzer can reach the parser.
        .target(name: "DaemonConfig", dependencies: [
            "VaultProtocol",
        ], swiftSettings: strict),

        // Built-in local OpenID Connect providers (Demo BankID, Demo Vipps) for `vaultd --demo`.
        .target(name: "DemoProviders", dependencies: [
            "VaultProtocol", "SodiumKit",
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
            .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "CryptoExtras", package: "swift-crypto"),  // RSA
        ], swiftSettings: strict),

        // The ID-token check alone (JWKS parsing, header, key choice, signature, claims), with no
        // network: OIDCFactor fetches the keys and calls it; fuzz-jwt builds only this (and jwt-kit,
        // its independent signer). swift-crypto does the signature arithmetic.
        .target(name: "OIDCToken", dependencies: [
            "VaultFactor",
            .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "CryptoExtras", package: "swift-crypto"),
        ], path: "Plugins/OIDCToken", swiftSettings: strict),

        // OpenID Connect logins (BankID, Vipps, ID-porten, any issuer): discovery, PKCE, loopback redirect, JWKS.
        .target(name: "OIDCFactor", dependencies: [
            "VaultFactor", "Locking", "OIDCToken", "CVaultShims",
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
        ], path: "Plugins/OIDCFactor", swiftSettings: strict),

        // Locking with the desktop: logind and the ScreenSaver over GDBus; knows nothing of the vault.
        .target(name: "DesktopLock", dependencies: ["CGIO", "LibrariesOnDemand", "Locking"], swiftSettings: strict),
        // The three programs as libraries, so that one binary can be all three.
        .target(name: "VaultdProgram", dependencies: [
            "DaemonConfig",
            "VaultServer", "VaultCore", "Keyring", "VaultStore", "PINFactor", "FingerprintFactor", "ExternalFactor", "OIDCFactor",
            "DemoProviders", "MemberSync", "CVaultShims", "Locking", "Prompter", "DesktopLock", "SecurityChip",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "Logging", package: "swift-log"),
        ], swiftSettings: strict),
        .target(name: "VaultctlProgram", dependencies: ["VaultClient", "VaultProtocol"], swiftSettings: strict),
        .target(name: "FPStubProgram", dependencies: [
            "FingerprintFactor", "DaemonConfig",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ], swiftSettings: strict),
        // vaultd is both, by the name it is started as (Sources/vaultd/main.swift):
        // what the package installs, with vaultctl beside it. vault-fpstub alone is
        // for development and tests.
        .executableTarget(name: "vaultd", dependencies: ["VaultdProgram", "FPStubProgram"],
                          swiftSettings: strict, linkerSettings: vaultdRelease),
        .executableTarget(name: "vaultctl", dependencies: ["VaultctlProgram"], swiftSettings: strict,
                          linkerSettings: vaultctlRelease),
        .executableTarget(name: "vault-fpstub", dependencies: ["FPStubProgram"], swiftSettings: strict),
        .executableTarget(name: "vault-bench", dependencies: [
            "VaultClient", "VaultProtocol", "SecurityChip", "SodiumKit", "CSodium", "FingerprintFactor", "Keyring", "Locking",
            "CVaultShims",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "Histogram", package: "hdrhistogram-swift"),
        ], swiftSettings: strict),

        // libFuzzer targets (scripts/fuzz) and the corpus replay they share.
        .target(name: "FuzzReplay", path: "Fuzz/Sources/FuzzReplay", swiftSettings: strict),
        fuzzTarget("fuzz-frames", ["VaultProtocol", "VaultWire", "LineFraming", .product(name: "NIOCore", package: "swift-nio")]),
        fuzzTarget("fuzz-plugin-messages", ["ExternalFactor"]),
        fuzzTarget("fuzz-config", ["DaemonConfig"]),
        // fuzz-jwt signs mutated headers and payloads with its fixed test keys.
        fuzzTarget("fuzz-jwt", ["OIDCToken", "VaultProtocol", .product(name: "JWTKit", package: "jwt-kit")]),

        // Helpers more than one test target uses: "cannot run here" (a failure under CI=true),
        // temp dirs, running a tool with a timeout, finding the built binaries.
        .target(name: "VaultTestSupport", dependencies: [
            "Locking", "VaultFactor", "VaultCore", "VaultStore", .product(name: "Logging", package: "swift-log"),
        ], path: "Tests/VaultTestSupport", swiftSettings: strict),

        .testTarget(name: "SodiumKitTests", dependencies: ["SodiumKit"]),
        .testTarget(name: "VaultProtocolTests", dependencies: ["VaultProtocol", "VaultWire", "DaemonConfig"]),
        .testTarget(name: "PINFactorTests", dependencies: ["PINFactor", "VaultFactor", "Locking", "VaultTestSupport"]),
        .testTarget(name: "FingerprintFactorTests", dependencies: ["FingerprintFactor", "VaultFactor", "Locking", "VaultTestSupport"]),
        .testTarget(name: "OIDCFactorTests", dependencies: [
            "OIDCFactor", "OIDCToken", "VaultFactor", "Locking", "VaultTestSupport",
            .product(name: "JWTKit", package: "jwt-kit"),
            .product(name: "CryptoExtras", package: "swift-crypto"),
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
        ]),
        .testTarget(name: "VaultStoreTests", dependencies: ["VaultStore", "VaultTestSupport"]),
        .testTarget(name: "SecurityChipTests", dependencies: ["SecurityChip", "SodiumKit", "VaultTestSupport"]),
        .testTarget(name: "KeyringTests", dependencies: ["Keyring", "SodiumKit", "VaultProtocol", "VaultTestSupport"]),
        .testTarget(name: "VaultCoreTests", dependencies: ["VaultCore", "VaultFactor", "VaultStore", "Keyring", "SecurityChip", "SodiumKit", "PINFactor", "Locking", "VaultTestSupport"]),
        // The request handler on its own, with a recording link in place of a socket.
        .testTarget(name: "VaultServerTests", dependencies: [
            "VaultServer", "VaultCore", "VaultFactor", "VaultStore", "VaultProtocol", "VaultWire", "PINFactor", "SodiumKit", "Locking", "CVaultShims",
            .product(name: "Logging", package: "swift-log"),
            .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOEmbedded", package: "swift-nio"),
        ]),
        .testTarget(name: "DemoProvidersTests", dependencies: [
            "DemoProviders", "VaultProtocol", "SodiumKit", "VaultTestSupport",
            .product(name: "JWTKit", package: "jwt-kit"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
        ]),
        .testTarget(name: "NationalIDTests", dependencies: ["NationalID", "SodiumKit"]),
        .testTarget(name: "MemberSyncTests", dependencies: [
            "MemberSync", "NationalID", "VaultStore", "VaultProtocol", "SodiumKit", "VaultTestSupport",
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
        ], exclude: ["Fixtures"]),
        .testTarget(name: "PrompterTests", dependencies: ["Prompter", "VaultCore", "VaultFactor", "SodiumKit"]),
        .testTarget(name: "IntegrationTests", dependencies: ["VaultClient", "VaultProtocol", "VaultWire", "Locking", "VaultTestSupport"]),
        // One contract every factor passes (PIN, a fake presence factor, external plugins), through a real Vault.
        .testTarget(name: "FactorContractTests", dependencies: [
            "VaultCore", "VaultStore", "VaultFactor", "PINFactor", "FingerprintFactor", "ExternalFactor", "SodiumKit", "Locking",
            "VaultTestSupport",
        ]),
    ]
)
