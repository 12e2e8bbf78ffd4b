// swift-tools-version:6.0
// An example for app authors: a program that asks SessionVault for its session
// through the VaultClient library. Depend on SessionVault by its git URL and a
// version; VaultClient is the only product an app needs.
import PackageDescription

let package = Package(
    name: "sessionvault-example",
    dependencies: [
        .package(url: "https://github.com/sessionvault/sessionvault.git", from: "0.1.0"),
    ],
    targets: [
        .executableTarget(name: "example-app", dependencies: [
            .product(name: "VaultClient", package: "sessionvault"),
        ]),
    ]
)
