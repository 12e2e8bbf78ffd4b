import ArgumentParser
import CVaultShims
import DaemonConfig
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import Keyring
import Logging
import NIOCore
import NIOPosix
import MemberSync
import OIDCFactor
import Prompter
import DemoProviders
import DesktopLock
import ExternalFactor
import FingerprintFactor
import PINFactor
import SecurityChip
import VaultCore
import VaultFactor
import VaultProtocol
import VaultServer
import VaultStore

/// vaultd: the per-user SessionVault daemon. The composition root: the only
/// place that knows the concrete keyring, store and factor plugins.
struct VaultDaemon: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "vaultd",
        abstract: "Keeps your login sessions sealed and releases them to your apps after you unlock.",
        version: SessionVaultVersion.string)

    @Option(help: "Socket path (default: $XDG_RUNTIME_DIR/sessionvault/vault.sock, or SESSIONVAULT_SOCKET).")
    var socket: String?

    @Option(help: "Data directory (default: $XDG_DATA_HOME/sessionvault, or SESSIONVAULT_DATA_DIR).")
    var dataDir: String?

    @Option(help: "Your config file (default: $XDG_CONFIG_HOME/sessionvault/config.toml, or SESSIONVAULT_CONFIG), read over the organization's /etc/sessionvault/config.toml (or SESSIONVAULT_SYSTEM_CONFIG).")
    var config: String?

    @Option(help: "Where the device key lives: secret-service (default) or file (a 0600 file; weaker).")
    var keyring: String?

    @Option(help: "Lock after this many seconds without requests (0 = never; default 900).")
    var idleTimeout: Int?

    @Option(help: "Log level: trace, debug, info, notice, warning, error.")
    var logLevel: String?

    @Flag(help: "Demo mode: built-in “Demo BankID” and “Demo Vipps” providers on 127.0.0.1 with synthetic people. Nothing real.")
    var demo = false

    mutating func run() async throws {
        umask(0o077)
        Hardening.disableCoreDumps()
        Hardening.raiseDescriptorLimit()
        let language = Language(locale: Paths.env("LC_ALL") ?? Paths.env("LC_MESSAGES") ?? Paths.env("LANG"))

        // The organization's file under the person's (ConfigLayers says which wins).
        let file: FileConfig
        let overridden: [String]
        do {
            let organization = try FileConfig.load(path: ConfigLayers.systemFile())
            let person = try FileConfig.load(path: config ?? Paths.defaultConfigFile())
            (file, overridden) = ConfigLayers.merge(organization: organization, person: person)
        } catch {
            Self.fail(Messages.configInvalid, detail: error.detail, language: language, code: 2)
        }
        let level = Logger.Level(rawValue: logLevel ?? file.log_level ?? "info") ?? .info
        LoggingSystem.bootstrap { label in
            var h = StreamLogHandler.standardError(label: label)
            h.logLevel = level
            return h
        }
        let logger = Logger(label: "vaultd")
        let clock = DaemonClock.make(logger: logger)
        if !overridden.isEmpty {
            logger.notice("the organization's settings are used instead of yours for: \(overridden.joined(separator: ", "))",
                          metadata: ["system_config": "\(ConfigLayers.systemFile())"])
        }

        let dataDir = Paths.dataDir(flag: dataDir, config: file)
        let socketPath = socket ?? Paths.env("SESSIONVAULT_SOCKET") ?? file.socket ?? Paths.defaultSocket()
        let keyringKind = keyring ?? file.keyring ?? "secret-service"

        let deviceKeys: any DeviceKeyStore
        switch keyringKind {
        case "secret-service": deviceKeys = SecretServiceKeyring()
        case "file":
            deviceKeys = FileKeyring(path: dataDir + "/device.key")
            logger.warning("the device key is kept in a file (--keyring=file): anyone who can read your files can open the vault's outer layer")
        default:
            Self.fail(Messages.configInvalid, detail: "keyring must be “secret-service” or “file”", language: language, code: 2)
        }
        let deviceKey: SecureBytes
        let created: Bool
        do {
            (deviceKey, created) = try deviceKeys.loadOrCreate()
        } catch {
            Self.fail(error.message, detail: "\(error)", language: language, code: 3)
        }
        if created { logger.notice("created a new device key", metadata: ["keyring": "\(deviceKeys.kind)"]) }

        let pin = file.pin
        // Unset keys take the defaults from the types that own them (ThrottlePolicy, PINFactor).
        let throttleDefaults = ThrottlePolicy()
        let throttle = ThrottlePolicy(freeAttempts: pin?.free_attempts ?? throttleDefaults.freeAttempts,
                                      firstDelay: pin?.first_delay ?? throttleDefaults.firstDelay,
                                      maxDelay: pin?.max_delay ?? throttleDefaults.maxDelay)
        var factors: [any UnlockFactor] = [pin?.min_length.map { PINFactor(minimumLength: $0, throttle: throttle) }
                                           ?? PINFactor(throttle: throttle)]
        if let fingerprint = await Self.fingerprintFactor(file, demo: demo, dataDir: dataDir, logger: logger, language: language) {
            factors.append(fingerprint)
        }
        // External factors (docs/plugins.md): unsafe files are refused with a logged reason.
        let pluginDir = file.plugins?.dir ?? dataDir + "/plugins"
        if let seconds = file.plugins?.probe_cache, seconds < 0 {
            Self.fail(Messages.configInvalid, detail: "plugins.probe_cache must be 0 (never reuse) or more seconds", language: language, code: 2)
        }
        if FileManager.default.fileExists(atPath: pluginDir) {
            let pluginLogger = logger
            let options = ExternalFactor.Options(
                timeouts: .init(probe: .seconds(file.plugins?.probe_timeout ?? 5), operation: .seconds(file.plugins?.timeout ?? 60)),
                throttle: throttle,
                probeCacheTime: .seconds(file.plugins?.probe_cache ?? 5),
                log: { record in
                    let level: Logger.Level = record.level == .error ? .error : record.level == .warning ? .warning : record.level == .info ? .info : .debug
                    pluginLogger.log(level: level, "\(record.message)", metadata: record.metadata.mapValues { .string($0) })
                })
            let discovery = await ExternalFactor.discover(directory: pluginDir, options: options)
            for refusal in discovery.refused {
                logger.warning("plugin refused", metadata: ["path": "\(refusal.path)", "reason": "\(refusal.reason)"])
            }
            factors += discovery.factors as [any UnlockFactor]
        }
        var cost = PasswordHash.Cost.interactive
        if let mib = pin?.argon_memory_mib { cost.memLimit = mib * 1024 * 1024 }
        if let ops = pin?.argon_ops { cost.opsLimit = UInt64(max(1, ops)) }
        let defaults = VaultConfig()   // the broker's defaults live there, once
        let vaultConfig = VaultConfig(idleTimeout: idleTimeout ?? file.idle_timeout ?? defaults.idleTimeout, pinCost: cost,
                                      promptTimeout: file.prompt_timeout ?? defaults.promptTimeout,
                                      maxUnlocked: max(0, file.max_unlocked ?? defaults.maxUnlocked),
                                      fingerprintMaxAge: file.fingerprint_max_hours.map { max(0, $0) * 3600 } ?? defaults.fingerprintMaxAge,
                                      perApp: file.per_app ?? defaults.perApp)

        // Identity providers: the configured ones, or the built-in demo ones.
        let http = OIDCHTTPClient()
        var profiles: [ProviderProfile]
        var demoProviders: DemoProviders?
        if demo {
            do {
                let d = try await DemoProviders.start(group: MultiThreadedEventLoopGroup.singleton)
                demoProviders = d
                var bankid = ProviderProfile.bankID(.test, clientID: d.bankID.clientID)
                var vipps = ProviderProfile.vipps(.test, clientID: d.vipps.clientID)
                bankid.issuer = d.bankID.issuer
                bankid.discoveryURL = d.bankID.discoveryURL
                bankid.displayName = d.bankID.displayName
                vipps.issuer = d.vipps.issuer
                vipps.discoveryURL = d.vipps.discoveryURL
                vipps.displayName = d.vipps.displayName
                profiles = [bankid, vipps]
                logger.notice("demo mode: Demo BankID and Demo Vipps on 127.0.0.1 (synthetic people only)",
                              metadata: ["bankid": "\(d.bankID.issuer)", "vipps": "\(d.vipps.issuer)"])
            } catch {
                Self.fail(Messages.standard(.internal), detail: "demo providers: \(error)", language: language, code: 2)
            }
        } else {
            let (configured, problems) = ProviderDirectory.profiles(from: file.providers ?? [:])
            if !problems.isEmpty {
                Self.fail(Messages.configInvalid, detail: problems.joined(separator: "; "), language: language, code: 2)
            }
            profiles = configured
        }
        let directory = ProviderDirectory(profiles: profiles, http: http, logger: logger, clock: clock)

        let chip = Self.chipBinding(file, logger: logger, language: language)
        let storePath = dataDir + "/vault.sqlite"
        // Member sync (the national identity number on the member record): the
        // registry from [members], or the seeded demo registry.
        let registry: (any MemberRegistry)?
        do {
            registry = try RegistryMembers.registry(file.members, dataDir: dataDir, demo: demo)
        } catch let e as ConfigError {
            Self.fail(Messages.configInvalid, detail: e.detail, language: language, code: 2)
        } catch {
            Self.fail(Messages.storeUnreadable, detail: "member registry: \(error)", language: language, code: 4)
        }
        var minimumAge: [String: Int] = [:]
        for (name, table) in file.providers ?? [:] { if let age = table.min_age { minimumAge[name] = age } }
        let auditForwarder = AuditForwarder()
        var memberSync: MemberSync?
        let (vault, _) = Self.openVault(
            storePath: storePath, deviceKey: deviceKey, deviceKeyIsNew: created, factors: factors, config: vaultConfig,
            logger: logger, language: language, providers: directory, chip: chip, clock: clock
        ) { store in
            guard let registry else { return RegistryMembers(sync: nil, minimumAge: minimumAge) }
            do {
                let key = try KeyDerivation.derive(key: deviceKey, parts: [.label("sessionvault/member-sync/v1")])
                let sync = try MemberSync(store: store, registry: registry, key: key, audit: { auditForwarder.record($0) })
                memberSync = sync
                return RegistryMembers(sync: sync, minimumAge: minimumAge)
            } catch {
                Self.fail(VaultStartupError.crypto("\(error)").message, detail: "member sync: \(error)", language: language, code: 4)
            }
        }
        auditForwarder.attach(vault.audit)
        // The audit chain's head lives beside the device key, where a rollback
        // of the vault file does not reach (a shortfall is logged and audited).
        if let heads = deviceKeys as? any AuditHeadStore {
            vault.audit.keepHead(in: heads, startingOver: created)
        }
        // Entries past the retention go, off the start-up path (AuditLog.Retention).
        vault.audit.pruneSoon()

        if let n = file.max_connections, n < 1 {
            Self.fail(Messages.configInvalid, detail: "max_connections must be at least 1", language: language, code: 2)
        }
        if let n = file.connection_idle_timeout, n < 0 {
            Self.fail(Messages.configInvalid, detail: "connection_idle_timeout must be 0 (never) or more seconds", language: language, code: 2)
        }
        let prompter = Prompter(configured: file.pinentry, timeout: vaultConfig.promptTimeout, logger: logger)
        if file.lock_on_screen_lock ?? true { Self.lockWithTheDesktop(vault, logger: logger) }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let activated = Systemd.activatedSocket()
        let server = VaultServer(vault: vault, socketPath: activated.flatMap(Systemd.socketPath(of:)) ?? socketPath, group: group,
                                 logger: logger, promptTimeout: vaultConfig.promptTimeout,
                                 limits: ConnectionLimits(
                                     idleTimeout: file.connection_idle_timeout ?? ConnectionLimits.defaultIdleTimeout,
                                     maxConnections: file.max_connections ?? ConnectionLimits.defaultMaxConnections),
                                 openableOrigins: { directory.loginPageOrigins() },
                                 prompterFactory: Self.pinentryPrompts(prompter, configured: file.pinentry, logger: logger))
        // SIGTERM/SIGINT are caught before the socket is bound, so a stop is
        // graceful from the moment a client can connect.
        let shutdown = Shutdown(on: [(SIGTERM, "SIGTERM"), (SIGINT, "SIGINT")])
        shutdown.onRequest { signal in logger.notice("stopping", metadata: ["signal": "\(signal)"]) }
        // The loops beside the listener stop when the stop is asked for, as it
        // begins; the listener then stops in its order (ListenerService.run).
        var loops = [Task { await Self.lockWhenIdle(vault, idleTimeout: vaultConfig.idleTimeout) }]
        if let memberSync { loops.append(Task { await Self.retryMemberSync(memberSync) }) }
        let running = loops
        shutdown.onRequest { _ in for loop in running { loop.cancel() } }
        await ListenerService(server: server, vault: vault, logger: logger, language: language, activatedFD: activated,
                              closeDialogs: { prompter.closeAll() }).run(until: shutdown)
        for loop in loops {
            loop.cancel()
            await loop.value
        }
        try? await demoProviders?.shutdown()
        // AsyncHTTPClient traps in deinit unless shut down first.
        await http.shutdown()
        // The event loop is left to die with the process: request tasks that
        // were still running must not find it shut down under them.
        logger.notice("vaultd stopped; the vault key was wiped")
    }

    /// This computer's security chip, as `tpm` says (docs/key-hierarchy.md):
    /// `auto` binds the vault to it when it answers, `required` does not start
    /// without it, `off` binds nothing new — but a chip that answers still opens
    /// what an earlier setting bound to it, so the vault can be unbound.
    static func chipBinding(_ file: FileConfig, logger: Logger, language: Language) -> ChipBinding {
        let mode = file.tpm ?? "auto"
        guard ["auto", "required", "off"].contains(mode) else {
            fail(Messages.configInvalid, detail: "tpm must be “auto”, “required” or “off”", language: language, code: 2)
        }
        // ESAPI logs every refused command to stderr; vaultd says what a refusal means itself.
        setenv("TSS2_LOG", "all+NONE", 0)
        let chip = TPMChip(location: file.tpm_device ?? TPMChip.defaultLocation)
        let device = chip.location.hasPrefix("device:") ? String(chip.location.dropFirst("device:".count)) : nil
        let present = device.map { FileManager.default.fileExists(atPath: $0) } ?? true
        do {
            // No device node, no TPM: said without loading libtss2 (and OpenSSL with it) into vaultd.
            guard present else { throw ChipError.unreachable("no \(chip.location)") }
            let status = try chip.status()
            logger.info("the TPM answers", metadata: ["tpm": "\(chip.location)", "binds": "\(mode != "off")",
                                                      "max_tries": "\(status.maxTries)", "lockout_armed": "\(status.lockoutArmed)"])
            return ChipBinding(chip: chip, bindsNewWraps: mode != "off", unavailable: mode == "off" ? Messages.chipTurnedOff : nil)
        } catch {
            if mode == "required" { fail(Messages.chipRequiredMissing, detail: "\(error)", language: language, code: 3) }
            logger.notice("no TPM is used", metadata: ["tpm": "\(chip.location)", "reason": "\(error)"])
            return ChipBinding(chip: nil, bindsNewWraps: false,
                               unavailable: mode == "off" ? Messages.chipTurnedOff : present ? Messages.chipNotUsedNoAccess : Messages.chipNotUsedNone)
        }
    }

    /// Opens the vault. When the keyring had lost its device key (a new one was
    /// just made) the old store can never open again: it is moved aside, not
    /// deleted, and a fresh vault starts, so the person goes straight to login.
    static func openVault(storePath: String, deviceKey: SecureBytes, deviceKeyIsNew: Bool, factors: [any UnlockFactor],
                          config: VaultConfig, logger: Logger, language: Language, providers: any IdentityProviderDirectory,
                          chip: ChipBinding, clock: @escaping @Sendable () -> Double,
                          members makeMembers: (VaultStore) -> any MemberDirectory) -> (Vault, VaultStore) {
        for round in 0..<2 {
            let store: VaultStore
            do {
                store = try VaultStore(path: storePath)
            } catch {
                let message: LocalizedText
                if case .tooNew = error { message = Messages.storeTooNew } else { message = Messages.storeUnreadable }
                fail(message, detail: "\(error)", language: language, code: 4)
            }
            do {
                let vault = try Vault(store: store, deviceKey: deviceKey, factors: factors, config: config, logger: logger,
                                      providers: providers, members: makeMembers(store), chip: chip, clock: clock)
                return (vault, store)
            } catch {
                if case .deviceKeyMismatch = error, deviceKeyIsNew, round == 0 {
                    let stamp = Int(Date().timeIntervalSince1970)
                    for suffix in ["", "-wal", "-shm"] {
                        let from = storePath + suffix
                        if FileManager.default.fileExists(atPath: from) {
                            try? FileManager.default.moveItem(atPath: from, toPath: "\(storePath).orphaned-\(stamp)\(suffix)")
                        }
                    }
                    logger.warning("the keyring's device key was new, so the old vault cannot be opened; it was moved aside and a new vault started",
                                   metadata: ["moved_to": "\(storePath).orphaned-\(stamp)"])
                    continue
                }
                fail(error.message, detail: "\(error)", language: language, code: 4)
            }
        }
        fail(Messages.storeUnreadable, detail: "could not start a fresh vault", language: language, code: 4)
    }

    /// Locks the vault when the screen locks, before suspend and at logout
    /// (DesktopLock). Subscribed before the socket opens, so a client that
    /// can connect already hears the `locked` these bring.
    static func lockWithTheDesktop(_ vault: Vault, logger: Logger) {
        let watcher = DesktopLockWatcher(
            sessionID: Paths.env("XDG_SESSION_ID"),
            onLock: { cause in Task { await vault.lockWithDesktop(reason: cause.rawValue) } },
            log: { logger.notice("\($0)") })
        let listening = watcher.start()
        if listening.isEmpty {
            logger.notice("no D-Bus: the vault does not lock with the desktop")
        } else {
            logger.info("locking with the desktop", metadata: ["listening": "\(listening.joined(separator: ", "))"])
        }
    }

    /// Prints the sentence (and a detail for whoever reads logs) and exits.
    static func fail(_ message: LocalizedText, detail: String, language: Language, code: Int32) -> Never {
        let text = "vaultd: \(message.text(language))\nvaultd: (detail: \(detail))\n"
        _ = text.withCString { write(STDERR_FILENO, $0, strlen($0)) }
        Glibc.exit(code)
    }
}

/// Binds the socket, serves until shutdown, then closes the listener, wipes the
/// vault key, closes client connections and removes the socket file.
struct ListenerService {
    let server: VaultServer
    let vault: Vault
    let logger: Logger
    let language: Language
    /// The socket systemd passed (socket activation), if any: not ours to unlink.
    let activatedFD: CInt?
    /// Ends every pinentry dialog (and reaps it): none may outlive vaultd.
    let closeDialogs: @Sendable () -> Void
    /// How long SIGTERM waits for refreshes in flight (systemd's stop timeout is 90 s).
    static let refreshBound = Duration.seconds(5)

    func run(until shutdown: Shutdown) async {
        let listener: Listener
        do {
            listener = try await server.start(activatedFD: activatedFD)
        } catch {
            VaultDaemon.fail(error.message, detail: "\(error)", language: language, code: 5)
        }
        let locked = vault.isLocked
        logger.notice("vaultd ready", metadata: ["socket": "\(server.socketPath)", "locked": "\(locked)",
                                                "activated": "\(activatedFD != nil)"])
        Systemd.notify("READY=1\nSTATUS=Serving \(server.socketPath)")
        shutdown.onRequest { _ in listener.close() }
        // Closed by the stop, or by an error on the listening socket: either
        // way the rest of this stops vaultd in order.
        try? await listener.closed.get()
        Systemd.notify("STOPPING=1")
        // First, so that requests waiting on a dialog end now (as cancelled), not at their timeout.
        closeDialogs()
        // A refresh in flight may hold the only copy of a rotated refresh
        // token: let it commit before the vault key is wiped and the HTTP
        // client shuts down (bounded, so a hung provider cannot hold vaultd).
        if !(await vault.settleRefreshes(within: ListenerService.refreshBound)) {
            logger.warning("stopped without waiting longer for refreshes", metadata: ["bound": "\(ListenerService.refreshBound)"])
        }
        await vault.lock(reason: "shutdown")
        vault.audit.flushRepeats()
        vault.audit.flushHead()
        server.closeConnections()
        // Only a socket vaultd bound itself (at start, or when it took a
        // replaced socket's path back), and only while it is still the file at
        // the path: systemd's is systemd's to remove.
        listener.removeSocket()
    }
}

extension VaultDaemon {
    /// Locks the vault after the configured idle time, until cancelled.
    static func lockWhenIdle(_ vault: Vault, idleTimeout: Int) async {
        guard idleTimeout > 0 else { return }
        let tick = Duration.seconds(max(1, min(idleTimeout / 10, 5)))
        while !Task.isCancelled {
            do { try await Task.sleep(for: tick) } catch { return }
            await vault.lockIfIdle()
        }
    }
}

enum Hardening {
    /// A core dump of vaultd would hold the vault key: forbid them.
    static func disableCoreDumps() {
        var limit = rlimit(rlim_cur: 0, rlim_max: 0)
        setrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &limit)
        _ = sv_set_not_dumpable()
    }

    /// Every client connection is a descriptor: raise the soft limit to the
    /// hard one so the connection cap, not EMFILE, is what a flood meets.
    static func raiseDescriptorLimit() {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
        limit.rlim_cur = limit.rlim_max
        setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
    }
}

/// vaultd's main (Sources/vaultd: one binary for vaultd, vaultctl and vault-fpstub).
public func vaultdMain() async {
    await VaultDaemon.main()
}
