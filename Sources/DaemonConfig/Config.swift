import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import VaultProtocol

/// `config.toml`, every key optional. See docs/operations.md for the reference.
public struct FileConfig: Codable, Sendable {
    public init() {}
    public var socket: String?
    public var data_dir: String?
    public var keyring: String?
    public var idle_timeout: Int?
    /// Seconds after an unlock that the vault locks however busy it is (0 = never).
    public var max_unlocked: Int?
    /// Hours the fingerprint reopens the vault after the last PIN or login (0 = no limit).
    public var fingerprint_max_hours: Int?
    public var prompt_timeout: Int?
    /// The pinentry program for vaultd's own dialogs (clients that say
    /// `"prompter": "vault"`); a path or a name in PATH. Default: the
    /// `SESSIONVAULT_PINENTRY` environment variable, then `pinentry`.
    public var pinentry: String?
    /// Seconds a client connection may sit idle before vaultd closes it (0 = never).
    public var connection_idle_timeout: Int?
    /// Client connections open at once.
    public var max_connections: Int?
    /// Lock the vault when the screen locks, before suspend and at logout
    /// (logind and the ScreenSaver over D-Bus). Default: true.
    public var lock_on_screen_lock: Bool?
    public var log_level: String?
    /// Each session only to the apps allowed it (default true). false gives
    /// every program of the user every session: weaker, for single-app setups.
    public var per_app: Bool?
    /// This computer's security chip (docs/key-hierarchy.md, "Bound to this
    /// computer"): auto (default: used when it answers) | required | off.
    public var tpm: String?
    /// Where the chip is reached, as a TCTI: "device:/dev/tpmrm0" (default), "swtpm:path=…" for tests.
    public var tpm_device: String?
    public var pin: PINSection?
    public var fingerprint: FingerprintSection?
    public var plugins: PluginsSection?
    public var members: MembersSection?

    /// The member registry for national-ID sync and organization/role claims.
    public struct MembersSection: Codable, Sendable {
        /// none (default) | sqlite | http
        public var registry: String?
        public var path: String?
        public var url: String?
        /// "Bearer TOKEN", or "Header-Name: value".
        public var auth_header: String?
        public var timeout: Int?
    }

    /// `[providers.NAME]` tables: BankID, Vipps, ID-porten or any OIDC issuer.
    public var providers: [String: ProviderSection]?

    public struct ProviderSection: Codable, Sendable {
        /// bankid | vipps | idporten | generic (default: the table's name when built in, else generic).
        public var profile: String?
        /// test | production (built-in profiles' issuers).
        public var environment: String?
        /// Overrides the profile's issuer (required for generic).
        public var issuer: String?
        public var display_name: String?
        public var client_id: String?
        /// A confidential client's secret (better: a gateway that holds it).
        public var client_secret: String?
        /// basic (default) | post
        public var client_auth: String?
        /// Gateway mode: a token proxy that holds the client secret and
        /// returns the provider's token response unchanged.
        public var gateway: String?
        /// The organization's backend token endpoint (docs/backend.md): it
        /// receives the code and every refresh and keeps its own session.
        public var backend: String?
        /// The backend's RFC 7009 revocation endpoint, told of every logout.
        public var backend_revocation: String?
        /// A fixed loopback port, for providers that need the exact redirect URI registered.
        public var redirect_port: Int?
        public var redirect_path: String?
        public var min_acr: String?
        /// The `acr` a login must reach to set a changed fingerprint up again.
        public var reenroll_min_acr: String?
        public var min_age: Int?
        public var request_timeout: Int?
        public var redirect_timeout: Int?
    }

    public struct PluginsSection: Codable, Sendable {
        /// Where `vault-factor-NAME` executables are looked for
        /// (default: $XDG_DATA_HOME/sessionvault/plugins).
        public var dir: String?
        public var probe_timeout: Int?
        /// Seconds a plugin's probe answer is reused by `status` and `factors` (0 = never).
        public var probe_cache: Int?
        public var timeout: Int?
    }

    public struct FingerprintSection: Codable, Sendable {
        /// "auto" (the default: fprintd when it answers and has a reader, else none),
        /// "fprintd" (the desktop's fingerprint service), "none", or "stub" (the
        /// simulated sensor, for demos and tests).
        public var reader: String?
        /// The stub's state file (default: DATA_DIR/fpstub.json; see `Paths.stubReaderState`).
        public var stub_state: String?
        /// The stub is a simulation any program of the user can drive: outside
        /// `vaultd --demo` it runs only when this is true.
        public var allow_stub_reader: Bool?
        public var scan_timeout: Int?
    }

    public struct PINSection: Codable, Sendable {
        public var min_length: Int?
        public var free_attempts: Int?
        public var first_delay: Int?
        public var max_delay: Int?
        public var argon_memory_mib: Int?
        public var argon_ops: Int?
    }

    public static func load(path: String) throws(ConfigError) -> FileConfig {
        guard FileManager.default.fileExists(atPath: path) else { return FileConfig() }
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw ConfigError(detail: "\(path): cannot be read")
        }
        do {
            return try parse(text)
        } catch {
            throw ConfigError(detail: "\(path): \(error.detail)")
        }
    }

    /// Parses config text; every failure becomes a `ConfigError` naming what is wrong.
    public static func parse(_ input: String) throws(ConfigError) -> FileConfig {
        // Editors may save a byte-order mark; TOML does not expect one.
        let text = input.hasPrefix("\u{FEFF}") ? String(input.dropFirst()) : input
        // TOML allows no raw control characters but tab and line ends: refuse
        // them here with the line number.
        var line = 1
        for scalar in text.unicodeScalars {
            if scalar == "\n" { line += 1; continue }
            if (scalar.value < 0x20 && scalar != "\t" && scalar != "\r") || scalar.value == 0x7F {
                throw ConfigError(detail: "line \(line): a control character (U+\(String(scalar.value, radix: 16, uppercase: true))) is not allowed")
            }
        }
        let tables = try ConfigText.parse(text)
        do {
            return try FileConfig(from: ConfigDecoder(tables: tables, path: []))
        } catch let e as WrongKind {
            throw ConfigError(detail: e.detail)
        } catch {
            throw ConfigError(detail: "\(error)")
        }
    }

    /// The settings a table may hold (nil: no such table), read off the types
    /// themselves so the list cannot drift from what is decoded.
    static func knownKeys(table: String) -> Set<String>? {
        func fields(_ value: Any) -> Set<String> { Set(Mirror(reflecting: value).children.compactMap(\.label)) }
        let parts = table.split(separator: ".", omittingEmptySubsequences: false)
        switch (parts.first.map(String.init) ?? "", parts.count) {
        case ("", _) where table.isEmpty: return fields(FileConfig()).subtracting(["pin", "fingerprint", "plugins", "members", "providers"])
        case ("pin", 1): return fields(PINSection())
        case ("fingerprint", 1): return fields(FingerprintSection())
        case ("plugins", 1): return fields(PluginsSection())
        case ("members", 1): return fields(MembersSection())
        case ("providers", 2): return fields(ProviderSection())
        default: return nil
        }
    }
}

public struct ConfigError: Error, Sendable {
    public var detail: String
    public init(detail: String) { self.detail = detail }
}

/// Where things live: flag, then environment, then config file, then XDG default.
public struct Paths {
    public var socket: String
    public var dataDir: String
    public var configFile: String

    public static func env(_ key: String) -> String? {
        guard let v = ProcessInfo.processInfo.environment[key], !v.isEmpty else { return nil }
        return v
    }

    public static func home() -> String { env("HOME") ?? FileManager.default.homeDirectoryForCurrentUser.path }

    public static func defaultConfigFile() -> String {
        if let c = env("SESSIONVAULT_CONFIG") { return c }
        let base = env("XDG_CONFIG_HOME") ?? home() + "/.config"
        return base + "/sessionvault/config.toml"
    }

    public static func defaultDataDir() -> String {
        let base = env("XDG_DATA_HOME") ?? home() + "/.local/share"
        return base + "/sessionvault"
    }

    /// The data directory: the flag, `SESSIONVAULT_DATA_DIR`, the config's `data_dir`, the XDG default.
    public static func dataDir(flag: String?, config: FileConfig) -> String {
        flag ?? env("SESSIONVAULT_DATA_DIR") ?? config.data_dir ?? defaultDataDir()
    }

    /// The stub fingerprint reader's state file, as vaultd and vault-fpstub both
    /// find it: `SESSIONVAULT_FPSTUB`, the config's `stub_state`, else
    /// `DATA_DIR/fpstub.json`. Any program of the user can write the file
    /// wherever it is (hence the opt-in); the default keeps it out of the
    /// socket directory, which holds vaultd's socket and nothing else.
    public static func stubReaderState(config: FileConfig, dataDir: String) -> String {
        env("SESSIONVAULT_FPSTUB") ?? config.fingerprint?.stub_state ?? dataDir + "/fpstub.json"
    }

    /// `$XDG_RUNTIME_DIR/sessionvault/vault.sock`; without a runtime dir, a
    /// per-user directory under /tmp (checked for ownership before use).
    public static func defaultSocket() -> String {
        if let s = env("SESSIONVAULT_SOCKET") { return s }
        if let r = env("XDG_RUNTIME_DIR") { return r + "/sessionvault/vault.sock" }
        return "/tmp/sessionvault-\(getuid())/vault.sock"
    }
}

/// `[fingerprint] reader`: which fingerprint backend vaultd uses.
public enum FingerprintReaderChoice: String, CaseIterable, Sendable {
    /// fprintd when the service answers and has a reader at start-up; else no fingerprint (no error).
    case auto
    /// fprintd always: a missing service or reader is shown as "reader not found".
    case fprintd
    case none
    /// The simulated sensor (vault-fpstub): demos and tests only, behind allow_stub_reader or --demo.
    case stub

    /// The configured choice; `auto` when unset.
    public static func from(_ config: FileConfig) throws(ConfigError) -> FingerprintReaderChoice {
        guard let raw = config.fingerprint?.reader else { return .auto }
        guard let choice = FingerprintReaderChoice(rawValue: raw) else {
            throw ConfigError(detail: "fingerprint.reader must be “auto” (the default), “fprintd”, “none” or “stub”, not “\(raw)”")
        }
        return choice
    }
}

extension StringProtocol {
    /// The text without the given characters at either end (TOML's space is " \t"):
    /// Foundation's `trimmingCharacters(in:)` needs CharacterSet, which is not in
    /// FoundationEssentials, and this module must not pull in ICU's data (a tool
    /// such as vault-fpstub would carry 37 MB for it).
    func trimmingTOMLSpace(_ characters: String) -> String {
        let drop = Set(characters.unicodeScalars)
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !drop.contains($0) }),
              let last = scalars.lastIndex(where: { !drop.contains($0) }) else { return "" }
        return String(String.UnicodeScalarView(scalars[first...last]))
    }
}
