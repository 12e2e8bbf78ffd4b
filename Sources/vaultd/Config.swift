import Foundation
import TOMLKit
import VaultCore
import VaultFactor
import VaultProtocol

/// `config.toml`, every key optional. See docs/operations.md for the reference.
struct FileConfig: Codable {
    var socket: String?
    var data_dir: String?
    var keyring: String?
    var idle_timeout: Int?
    var prompt_timeout: Int?
    var log_level: String?
    var pin: PINSection?
    var fingerprint: FingerprintSection?
    var plugins: PluginsSection?

    struct PluginsSection: Codable {
        /// Where `vault-factor-NAME` executables are looked for
        /// (default: $XDG_DATA_HOME/sessionvault/plugins).
        var dir: String?
        var probe_timeout: Int?
        var timeout: Int?
    }

    struct FingerprintSection: Codable {
        /// "stub" (the simulated sensor; the default) or "none". fprintd comes later.
        var reader: String?
        var stub_state: String?
        var scan_timeout: Int?
    }

    struct PINSection: Codable {
        var min_length: Int?
        var free_attempts: Int?
        var first_delay: Int?
        var max_delay: Int?
        var argon_memory_mib: Int?
        var argon_ops: Int?
    }

    static func load(path: String) throws(ConfigError) -> FileConfig {
        guard FileManager.default.fileExists(atPath: path) else { return FileConfig() }
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw ConfigError(detail: "\(path): cannot be read")
        }
        do {
            return try TOMLDecoder().decode(FileConfig.self, from: text)
        } catch let e as TOMLParseError {
            throw ConfigError(detail: "\(path): line \(e.source.begin.line): \(e.description)")
        } catch let e as DecodingError {
            throw ConfigError(detail: "\(path): \(describe(e))")
        } catch {
            throw ConfigError(detail: "\(path): \(error)")
        }
    }

    /// TOMLKit reports a wrong type as a missing key; name the key and the expected type instead.
    static func describe(_ e: DecodingError) -> String {
        switch e {
        case .keyNotFound(let key, let ctx):
            let path = (ctx.codingPath.map(\.stringValue) + [key.stringValue]).joined(separator: ".")
            return "“\(path)” has the wrong type or is missing"
        case .valueNotFound(_, let ctx):
            return "“\(ctx.codingPath.map(\.stringValue).joined(separator: "."))” has no value"
        case .typeMismatch(let type, let ctx):
            return "“\(ctx.codingPath.map(\.stringValue).joined(separator: "."))” must be \(type)"
        case .dataCorrupted(let ctx):
            return "“\(ctx.codingPath.map(\.stringValue).joined(separator: "."))”: \(ctx.debugDescription)"
        default:
            return "a value has the wrong type"
        }
    }
}

struct ConfigError: Error {
    var detail: String
}

/// Where things live: flag, then environment, then config file, then XDG default.
struct Paths {
    var socket: String
    var dataDir: String
    var configFile: String

    static func env(_ key: String) -> String? {
        guard let v = ProcessInfo.processInfo.environment[key], !v.isEmpty else { return nil }
        return v
    }

    static func home() -> String { env("HOME") ?? NSHomeDirectory() }

    static func defaultConfigFile() -> String {
        if let c = env("SESSIONVAULT_CONFIG") { return c }
        let base = env("XDG_CONFIG_HOME") ?? home() + "/.config"
        return base + "/sessionvault/config.toml"
    }

    static func defaultDataDir() -> String {
        let base = env("XDG_DATA_HOME") ?? home() + "/.local/share"
        return base + "/sessionvault"
    }

    /// `$XDG_RUNTIME_DIR/sessionvault/vault.sock`; without a runtime dir, a
    /// per-user directory under /tmp (checked for ownership before use).
    static func defaultSocket() -> String {
        if let s = env("SESSIONVAULT_SOCKET") { return s }
        if let r = env("XDG_RUNTIME_DIR") { return r + "/sessionvault/vault.sock" }
        return "/tmp/sessionvault-\(getuid())/vault.sock"
    }
}
