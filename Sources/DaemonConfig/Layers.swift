/// Two files, one config: the organization's, set up once for every user of a
/// computer (`/etc/sessionvault/config.toml`), under the person's own
/// (`~/.config/sessionvault/config.toml`). The organization decides whom people
/// log in with and how strict the vault is at least; the person may change what
/// only affects their own comfort, and may always be stricter.
///
/// - The organization's alone, once its file sets them: `[providers]`,
///   `[members]`, `[plugins]`, `fingerprint.allow_stub_reader`. A person's file
///   (or a program writing to it) cannot send logins to another issuer.
/// - The stricter of the two: `per_app`, `lock_on_screen_lock` (true wins),
///   `tpm` (required over auto over off),
///   `keyring` (secret-service wins over file), the PIN's minimum length and
///   costs (higher wins), its free attempts (fewer wins), `idle_timeout`,
///   `max_unlocked`, `fingerprint_max_hours` (shorter wins; 0 = never is the
///   weakest).
/// - Anything else: the person's file wins (socket, data_dir, pinentry,
///   prompt_timeout, log_level, the fingerprint reader, …).
public enum ConfigLayers {
    /// The organization's file: `SESSIONVAULT_SYSTEM_CONFIG`, else `/etc/sessionvault/config.toml`.
    public static func systemFile() -> String {
        Paths.env("SESSIONVAULT_SYSTEM_CONFIG") ?? "/etc/sessionvault/config.toml"
    }

    /// The config in force, and one line for each of the person's settings the
    /// organization's file overrode (vaultd logs them, without values).
    public static func merge(organization org: FileConfig, person: FileConfig) -> (config: FileConfig, overridden: [String]) {
        var out = person
        var overridden: [String] = []

        func organizationOnly<T>(_ name: String, _ o: T?, _ p: T?) -> T? {
            guard let o else { return p }
            if p != nil { overridden.append(name) }
            return o
        }
        out.providers = organizationOnly("[providers]", org.providers, person.providers)
        out.members = organizationOnly("[members]", org.members, person.members)
        out.plugins = organizationOnly("[plugins]", org.plugins, person.plugins)

        /// `stricter(o, p)`: the stricter of two set values.
        func pick<T: Equatable>(_ name: String, _ o: T?, _ p: T?, stricter: (T, T) -> T) -> T? {
            guard let o else { return p }
            guard let p else { return o }
            let chosen = stricter(o, p)
            if chosen != p { overridden.append(name) }
            return chosen
        }
        let trueWins: (Bool, Bool) -> Bool = { $0 || $1 }
        let higher: (Int, Int) -> Int = { max($0, $1) }
        // A limit in seconds or hours where 0 means "no limit".
        let shorterLimit: (Int, Int) -> Int = { a, b in a <= 0 ? b : b <= 0 ? a : min(a, b) }

        out.per_app = pick("per_app", org.per_app, person.per_app, stricter: trueWins)
        // required over auto over off; an unknown word is kept, so vaultd names it.
        let chipRank = ["off": 0, "auto": 1, "required": 2]
        out.tpm = pick("tpm", org.tpm, person.tpm) { o, p in (chipRank[o] ?? 3) > (chipRank[p] ?? 3) ? o : p }
        out.lock_on_screen_lock = pick("lock_on_screen_lock", org.lock_on_screen_lock, person.lock_on_screen_lock, stricter: trueWins)
        out.keyring = pick("keyring", org.keyring, person.keyring) { o, p in o == "secret-service" || p == "secret-service" ? "secret-service" : p }
        out.idle_timeout = pick("idle_timeout", org.idle_timeout, person.idle_timeout, stricter: shorterLimit)
        out.max_unlocked = pick("max_unlocked", org.max_unlocked, person.max_unlocked, stricter: shorterLimit)
        out.fingerprint_max_hours = pick("fingerprint_max_hours", org.fingerprint_max_hours, person.fingerprint_max_hours,
                                         stricter: shorterLimit)

        if let o = org.pin {
            var pin = person.pin ?? FileConfig.PINSection()
            pin.min_length = pick("pin.min_length", o.min_length, pin.min_length, stricter: higher)
            pin.free_attempts = pick("pin.free_attempts", o.free_attempts, pin.free_attempts, stricter: min)
            pin.first_delay = pick("pin.first_delay", o.first_delay, pin.first_delay, stricter: higher)
            pin.max_delay = pick("pin.max_delay", o.max_delay, pin.max_delay, stricter: higher)
            pin.argon_memory_mib = pick("pin.argon_memory_mib", o.argon_memory_mib, pin.argon_memory_mib, stricter: higher)
            pin.argon_ops = pick("pin.argon_ops", o.argon_ops, pin.argon_ops, stricter: higher)
            out.pin = pin
        }
        if let o = org.fingerprint {
            var fingerprint = person.fingerprint ?? FileConfig.FingerprintSection()
            fingerprint.allow_stub_reader = organizationOnly("fingerprint.allow_stub_reader", o.allow_stub_reader,
                                                             fingerprint.allow_stub_reader)
            fingerprint.reader = fingerprint.reader ?? o.reader
            fingerprint.scan_timeout = fingerprint.scan_timeout ?? o.scan_timeout
            fingerprint.stub_state = fingerprint.stub_state ?? o.stub_state
            out.fingerprint = fingerprint
        }

        // The person's comfort: theirs when set, else the organization's.
        out.socket = person.socket ?? org.socket
        out.data_dir = person.data_dir ?? org.data_dir
        out.prompt_timeout = person.prompt_timeout ?? org.prompt_timeout
        out.pinentry = person.pinentry ?? org.pinentry
        out.connection_idle_timeout = person.connection_idle_timeout ?? org.connection_idle_timeout
        out.max_connections = person.max_connections ?? org.max_connections
        out.log_level = person.log_level ?? org.log_level
        out.tpm_device = person.tpm_device ?? org.tpm_device
        return (out, overridden)
    }
}
