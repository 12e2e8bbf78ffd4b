import FoundationEssentials
import VaultFactor
#if canImport(Glibc)
import Glibc
#endif

/// An unlock factor implemented by an external executable `vault-factor-NAME`
/// (any language), in the spirit of age plugins and PAM's conversation function.
///
/// Each operation starts the executable once with one argument — `probe`,
/// `enroll` or `unlock` — and talks JSON lines over its stdin/stdout (see
/// `PluginCodec` and docs/plugins.md). The plugin decides whether the person is
/// present; the vault decides what that opens. A plugin never sees the vault
/// key, the device key or any session.
///
/// Nothing a plugin does can crash or hang the caller: a plugin that hangs is
/// killed (SIGKILL to its process group) when its time budget runs out; one
/// that crashes, exits without a final message, or writes garbage or an
/// over-long line ends the operation with `FactorError.unavailable` and a
/// sentence with a next step. Its stderr goes to vaultd's log (truncated),
/// never to the person.
public struct ExternalFactor: UnlockFactor {
    public struct Timeouts: Sendable, Equatable {
        /// For `probe` (also at discovery): it must answer quickly and never prompt.
        public var probe: Duration
        /// For `enroll` and `unlock`. Counts only time spent waiting for the
        /// plugin: the clock stops while the person answers one of its prompts.
        public var operation: Duration
        /// How long a plugin may take to exit after its final message (or after
        /// `cancel`) before it is killed.
        public var exitGrace: Duration

        public init(probe: Duration = .seconds(5), operation: Duration = .seconds(60), exitGrace: Duration = .seconds(2)) {
            self.probe = probe
            self.operation = operation
            self.exitGrace = exitGrace
        }
    }

    /// A line for vaultd's log (the module doesn't depend on a logging library).
    public struct LogRecord: Sendable {
        public enum Level: String, Sendable { case debug, info, warning, error }
        public var level: Level
        public var message: String
        public var metadata: [String: String]
    }

    public struct Options: Sendable {
        public var timeouts: Timeouts
        /// Throttling the vault applies to secret plugins (they can't weaken it).
        public var throttle: ThrottlePolicy
        /// Added to (and overriding) vaultd's own environment for each run.
        public var environment: [String: String]
        /// Names a plugin may not take: built-in factors and the device slot.
        public var reservedNames: Set<String>
        /// Owners a plugin file and its directory may have: us, and root (a
        /// package-managed plugin directory; root can replace anything anyway).
        public var trustedOwners: Set<uid_t>
        /// How long a probe's answer is reused. `status` and `factors` probe
        /// every factor, and a client polling them would otherwise start every
        /// plugin on every call; the price is that a key plugged in or pulled
        /// out shows up to this much later. Zero: every probe runs the plugin.
        public var probeCacheTime: Duration
        public var log: @Sendable (LogRecord) -> Void

        public init(timeouts: Timeouts = Timeouts(), throttle: ThrottlePolicy = ThrottlePolicy(),
                    environment: [String: String] = [:],
                    reservedNames: Set<String> = ["pin", "fingerprint", "oidc", "device"],
                    trustedOwners: Set<uid_t> = [geteuid(), 0],
                    probeCacheTime: Duration = .seconds(5),
                    log: @escaping @Sendable (LogRecord) -> Void = { _ in }) {
            self.timeouts = timeouts
            self.throttle = throttle
            self.environment = environment
            self.reservedNames = reservedNames
            self.trustedOwners = trustedOwners
            self.probeCacheTime = probeCacheTime
            self.log = log
        }
    }

    /// `rank` may be changed by vaultd (configured order); the rest comes from the plugin's probe.
    public var descriptor: FactorDescriptor
    /// NAME in `vault-factor-NAME`; also the factor id.
    public let name: String
    /// The resolved path that is run.
    public let executable: String
    public let options: Options
    /// Shared by every copy of this factor.
    let probeCache: ProbeCache

    init(name: String, executable: String, probed: PluginDescriptor, options: Options) {
        self.name = name
        self.executable = executable
        self.options = options
        self.descriptor = FactorDescriptor(
            id: FactorID(name), displayName: probed.name, rank: probed.rank, contribution: probed.contribution,
            throttle: probed.contribution == .lowEntropySecret ? options.throttle : nil)
        // The probe that loaded the plugin counts as its first answer.
        let unavailable = probed.reason
            ?? PluginRunner(name: name, executable: executable, displayName: probed.name, options: options).sentence(.unavailable)
        self.probeCache = ProbeCache(lifetime: options.probeCacheTime, seed: probed.available ? .available : .unavailable(unavailable))
    }

    // MARK: - UnlockFactor

    /// The plugin's `probe`, run at most once per `Options.probeCacheTime`.
    public func probe() async -> FactorPresence {
        await probeCache.presence { [self] in await runProbe() }
    }

    func runProbe() async -> FactorPresence {
        do {
            guard case .descriptor(let d) = try await runner.run(.probe, conversation: nil, slot: nil) else {
                return .unavailable(runner.sentence(.garbled))
            }
            guard d.contribution == descriptor.contribution else {
                options.log(LogRecord(level: .error, message: "plugin changed its contribution kind since it was loaded; restart vaultd",
                                      metadata: ["plugin": name]))
                return .unavailable(runner.sentence(.garbled))
            }
            return d.available ? .available : .unavailable(d.reason ?? runner.sentence(.unavailable))
        } catch {
            if case .unavailable(let reason) = error { return .unavailable(reason) }
            return .unavailable(runner.sentence(.unavailable))
        }
    }

    public func enroll(_ conversation: any FactorConversation) async throws(FactorError) -> FactorProof {
        try proof(from: try await runner.run(.enroll, conversation: conversation, slot: nil))
    }

    public func verify(_ conversation: any FactorConversation, slot: EnrolledSlot) async throws(FactorError) -> FactorProof {
        try proof(from: try await runner.run(.unlock, conversation: conversation, slot: slot))
    }

    func proof(from message: PluginMessage) throws(FactorError) -> FactorProof {
        guard case .ok(let result) = message else { throw .unavailable(runner.sentence(.garbled)) }
        switch descriptor.contribution {
        case .lowEntropySecret:
            guard let secret = result.contribution else {
                options.log(LogRecord(level: .error, message: "secret plugin answered ok without a contribution", metadata: ["plugin": name]))
                throw .unavailable(runner.sentence(.garbled))
            }
            return FactorProof(contribution: secret, enrollmentState: result.enrollmentState, binding: result.binding)
        case .presenceOnly:
            guard result.contribution == nil else {
                options.log(LogRecord(level: .error, message: "presence plugin sent a contribution", metadata: ["plugin": name]))
                throw .unavailable(runner.sentence(.garbled))
            }
            return FactorProof(contribution: nil, enrollmentState: result.enrollmentState, binding: result.binding)
        }
    }

    var runner: PluginRunner {
        PluginRunner(name: name, executable: executable, displayName: descriptor.displayName, options: options)
    }
}

// MARK: - Running one operation

/// Runs one operation of a plugin and relays its conversation.
struct PluginRunner: Sendable {
    let name: String
    let executable: String
    let displayName: LocalizedText
    let options: ExternalFactor.Options

    enum Problem {
        case notStarted, timedOut, crashed, garbled, unavailable, rejected
    }

    /// Runs `op` and returns its final message (`descriptor` for probe, `ok`
    /// otherwise); a plugin's `error` and every failure are thrown.
    func run(_ op: PluginOperation, conversation: (any FactorConversation)?, slot: EnrolledSlot?) async throws(FactorError) -> PluginMessage {
        try await runExplained(op, conversation: conversation, slot: slot).result.get()
    }

    /// As `run`, with what went wrong in words for the log (nil when nothing did).
    func runExplained(_ op: PluginOperation, conversation: (any FactorConversation)?,
                      slot: EnrolledSlot?) async -> (result: Result<PluginMessage, FactorError>, problem: String?) {
        let budget = op == .probe ? options.timeouts.probe : options.timeouts.operation
        var environment = ProcessInfo.processInfo.environment
        for (k, v) in options.environment { environment[k] = v }
        let process: PluginProcess
        do {
            process = try PluginProcess.spawn(executable: executable, arguments: [op.rawValue],
                                              environment: environment, budget: budget)
        } catch {
            log(.error, "could not start plugin: \(error)", op)
            return (.failure(.unavailable(sentence(.notStarted))), "it could not be started: \(error)")
        }
        process.send(PluginCodec.start(op, factor: name, language: conversation?.language ?? .en, slot: slot))
        return await withTaskCancellationHandler {
            await converse(process, op, conversation)
        } onCancel: {
            process.terminate()
        }
    }

    private func converse(_ process: PluginProcess, _ op: PluginOperation,
                          _ conversation: (any FactorConversation)?) async -> (result: Result<PluginMessage, FactorError>, problem: String?) {
        var final: Result<PluginMessage, FactorError>?
        var problem: String?
        /// Ends the exchange: no more input for the plugin, a short grace to exit.
        func conclude(_ result: Result<PluginMessage, FactorError>) {
            final = result
            process.closeInput()
            process.finish(within: options.timeouts.exitGrace)
        }
        func violation(_ reason: String) {
            problem = reason
            final = .failure(.unavailable(sentence(.garbled)))
            process.terminate()
        }

        for await event in process.events {
            switch event {
            case .line(var bytes):
                defer { Sodium.wipe(&bytes) }
                guard final == nil else { continue }   // after the final word; ignored
                let message: PluginMessage
                do {
                    message = try PluginCodec.decode(&bytes)
                } catch {
                    violation("bad line: \(error.reason)")
                    continue
                }
                guard op != .probe || message.isFinal else {
                    violation("\"\(message.typeName)\" during probe: probe must never talk to the person")
                    continue
                }
                switch message {
                case .descriptor:
                    if op == .probe { conclude(.success(message)) } else { violation("\"descriptor\" outside probe") }
                case .ok:
                    if op != .probe { conclude(.success(message)) } else { violation("\"ok\" during probe") }
                case .error(let code, let text):
                    conclude(.failure(factorError(code, text)))
                case .message(let text):
                    await conversation?.show(text)
                case .openURL(let url, let text):
                    do {
                        try await conversation?.openURL(url, text)
                    } catch {
                        process.send(PluginCodec.cancel)
                        conclude(.failure(error))
                    }
                case .secret(let text):
                    guard let conversation else { violation("prompt without a person"); continue }
                    process.pauseClock()
                    let answer: Result<SecureBytes, FactorError>
                    do { answer = .success(try await conversation.askSecret(text)) } catch { answer = .failure(error) }
                    process.resumeClock()
                    switch answer {
                    case .success(let secret):
                        process.send(PluginCodec.answer(secret: secret))
                    case .failure(let error):
                        process.send(PluginCodec.cancel)
                        conclude(.failure(error))
                    }
                case .confirm(let text):
                    guard let conversation else { violation("prompt without a person"); continue }
                    process.pauseClock()
                    let answer: Result<Bool, FactorError>
                    do { answer = .success(try await conversation.confirm(text)) } catch { answer = .failure(error) }
                    process.resumeClock()
                    switch answer {
                    case .success(let yes):
                        process.send(PluginCodec.answer(confirmed: yes))
                    case .failure(let error):
                        process.send(PluginCodec.cancel)
                        conclude(.failure(error))
                    }
                }
            case .finished(let t):
                var metadata = ["plugin": name, "op": op.rawValue, "outcome": t.summary,
                                "ms": "\(t.elapsed.components.seconds * 1000 + t.elapsed.components.attoseconds / 1_000_000_000_000_000)"]
                if !t.stderr.isEmpty { metadata["stderr"] = (t.stderrTruncated ? "…" : "") + t.stderr }
                if let problem { metadata["problem"] = problem }
                if final == nil {
                    switch t.killed {
                    case .timeout?:
                        final = .failure(.unavailable(sentence(.timedOut)))
                        metadata["problem"] = "no final message within \(budgetText(op))"
                    case .lineTooLong?:
                        final = .failure(.unavailable(sentence(.garbled)))
                        metadata["problem"] = "line longer than \(PluginCodec.maxLineLength) bytes"
                    case .tooMuchOutput?:
                        final = .failure(.unavailable(sentence(.garbled)))
                        metadata["problem"] = "more than \(PluginProcess.maxOutput) bytes of output"
                    default:
                        final = .failure(.unavailable(sentence(.crashed)))
                        metadata["problem"] = metadata["problem"] ?? "ended without a final message"
                    }
                }
                problem = metadata["problem"]
                let clean = problem == nil && t.killed == nil && t.exitStatus == 0
                let level: ExternalFactor.LogRecord.Level = clean ? .debug : (problem != nil ? .warning : .info)
                options.log(ExternalFactor.LogRecord(level: level, message: "plugin run ended", metadata: metadata))
            }
        }
        return (final ?? .failure(.unavailable(sentence(.crashed))), problem)
    }

    private func budgetText(_ op: PluginOperation) -> String {
        "\(op == .probe ? options.timeouts.probe : options.timeouts.operation)"
    }

    private func log(_ level: ExternalFactor.LogRecord.Level, _ message: String, _ op: PluginOperation) {
        options.log(ExternalFactor.LogRecord(level: level, message: message, metadata: ["plugin": name, "op": op.rawValue]))
    }

    func factorError(_ code: PluginErrorCode, _ text: LocalizedText?) -> FactorError {
        switch code {
        case .cancelled: return .cancelled
        case .noMatch: return .noMatch
        case .tooManyAttempts: return .tooManyAttempts
        case .unavailable: return .unavailable(text ?? sentence(.unavailable))
        case .rejected: return .rejected(text ?? sentence(.rejected))
        case .timeout: return .timeout
        }
    }

    /// The sentences a person sees when a plugin misbehaves: what happened and what to do next.
    func sentence(_ problem: Problem) -> LocalizedText {
        let en = "“\(displayName.en)”", nb = "«\(displayName.nb)»"
        let file = "vault-factor-\(name)"
        switch problem {
        case .notStarted:
            return LocalizedText(
                en: "The unlock method \(en) could not be started. Use your PIN or log in with BankID or Vipps, and check that \(file) is installed correctly.",
                nb: "Opplåsingsmåten \(nb) kunne ikke startes. Bruk PIN-koden eller logg inn med BankID eller Vipps, og sjekk at \(file) er riktig installert.")
        case .timedOut:
            return LocalizedText(
                en: "The unlock method \(en) did not respond in time and was stopped. Try again, or use your PIN or log in with BankID or Vipps.",
                nb: "Opplåsingsmåten \(nb) svarte ikke i tide og ble stoppet. Prøv igjen, eller bruk PIN-koden eller logg inn med BankID eller Vipps.")
        case .crashed:
            return LocalizedText(
                en: "The unlock method \(en) stopped unexpectedly. Try again, or use your PIN or log in with BankID or Vipps; if it keeps happening, reinstall \(file).",
                nb: "Opplåsingsmåten \(nb) stoppet uventet. Prøv igjen, eller bruk PIN-koden eller logg inn med BankID eller Vipps; hvis det fortsetter, installer \(file) på nytt.")
        case .garbled:
            return LocalizedText(
                en: "The unlock method \(en) sent something the vault does not understand. Use your PIN or log in with BankID or Vipps; \(file) may need an update.",
                nb: "Opplåsingsmåten \(nb) sendte noe hvelvet ikke forstår. Bruk PIN-koden eller logg inn med BankID eller Vipps; \(file) må kanskje oppdateres.")
        case .unavailable:
            return LocalizedText(
                en: "The unlock method \(en) cannot be used right now. Use your PIN or log in with BankID or Vipps.",
                nb: "Opplåsingsmåten \(nb) kan ikke brukes nå. Bruk PIN-koden eller logg inn med BankID eller Vipps.")
        case .rejected:
            return LocalizedText(
                en: "The unlock method \(en) did not accept that. Try again, or use your PIN or log in with BankID or Vipps.",
                nb: "Opplåsingsmåten \(nb) godtok ikke det. Prøv igjen, eller bruk PIN-koden eller logg inn med BankID eller Vipps.")
        }
    }
}
