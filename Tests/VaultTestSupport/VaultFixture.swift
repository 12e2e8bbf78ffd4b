import Foundation
import Logging
import VaultCore
import VaultFactor
import VaultStore

/// A real store in a fresh temporary directory and a random device key, as
/// vaultd has them, and the broker made on them: what the broker's tests and
/// the factor contract tests start from.
public struct VaultFixture {
    public let dir: String
    public let store: VaultStore
    public let deviceKey: SecureBytes
    public static let logger: Logger = {
        var l = Logger(label: "test")
        l.logLevel = .critical
        return l
    }()

    public init() throws {
        dir = NSTemporaryDirectory() + "vault-test-\(UUID().uuidString)"
        store = try VaultStore(path: dir + "/vault.sqlite")
        deviceKey = try SecureBytes.random(count: 32)
    }

    /// The broker on this store, with no idle timeout; `clock` moves its timers by hand.
    public func vault(_ factors: [any UnlockFactor], config: VaultConfig = VaultConfig(idleTimeout: 0),
                      providers: any IdentityProviderDirectory = NoIdentityProviders(),
                      clock: TestClock? = nil) throws -> Vault {
        if let clock {
            return try Vault(store: store, deviceKey: deviceKey, factors: factors, config: config, logger: Self.logger,
                             providers: providers, clock: clock.reading)
        }
        return try Vault(store: store, deviceKey: deviceKey, factors: factors, config: config, logger: Self.logger, providers: providers)
    }

    /// A second broker on the same files, as after a restart of vaultd.
    public func reopened(_ factors: [any UnlockFactor], providers: any IdentityProviderDirectory = NoIdentityProviders()) throws -> Vault {
        let again = try VaultStore(path: dir + "/vault.sqlite")
        return try Vault(store: again, deviceKey: deviceKey, factors: factors, config: VaultConfig(idleTimeout: 0),
                         logger: Self.logger, providers: providers)
    }

    public func cleanup() { try? FileManager.default.removeItem(atPath: dir) }
}
