import ArgumentParser
import DaemonConfig
import FingerprintFactor
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// `vault-fpstub`: drives the simulated fingerprint reader (StubReader) for demos
/// and tests. It changes the same state file that vaultd's fingerprint factor reads.
struct FPStub: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "vault-fpstub",
        abstract: "Drive the simulated fingerprint reader: plug it in, enroll fingers, script scan outcomes.",
        discussion: """
            The state file is --state, else $SESSIONVAULT_FPSTUB, else the config's [fingerprint] stub_state, \
            else fpstub.json in vaultd's data directory ($SESSIONVAULT_DATA_DIR, the config's data_dir, or \
            $XDG_DATA_HOME/sessionvault), the file vaultd reads. \
            No state file means no reader. Exit codes: 0 done; 1 failed (no reader, unknown finger, unreadable \
            state); 2 wrong usage.
            """,
        subcommands: [Plug.self, Unplug.self, EnrollFinger.self, RemoveFinger.self, List.self, Next.self,
                      Clear.self, Reset.self])

    @OptionGroup var options: StateOptions

    /// No subcommand is wrong usage: say what there is, exit 2.
    func run() throws {
        printError(FPStub.helpMessage())
        throw ExitCode(2)
    }

    /// ArgumentParser's own main, except that wrong usage exits with 2 (not 64).
    static func main() {
        do {
            var command = try parseAsRoot()
            try command.run()
        } catch {
            if exitCode(for: error) == .validationFailure {
                printError(fullMessage(for: error))
                Glibc.exit(2)
            }
            exit(withError: error)
        }
    }
}

struct StateOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The stub reader's state file.", valueName: "path"))
    var state: String?

    /// The reader at `--state`, else where vaultd looks for it (its config read as vaultd reads it).
    var reader: StubReader {
        get throws {
            if let state { return StubReader(path: state) }
            let config: FileConfig
            do {
                config = try FileConfig.load(path: Paths.defaultConfigFile())
            } catch {
                throw ConfigUnreadable(detail: error.detail)
            }
            return StubReader(path: Paths.stubReaderState(config: config, dataDir: Paths.dataDir(flag: nil, config: config)))
        }
    }
}

/// vaultd's config could not be read, so the state file it names is unknown.
struct ConfigUnreadable: Error, CustomStringConvertible {
    var detail: String
    var description: String {
        "vaultd's config file has an error, so the stub reader's state file is unknown: \(detail). Fix it, or name the file with --state."
    }
}

struct Plug: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Plug the reader in (creates an empty reader if there is none).")
    @OptionGroup var options: StateOptions

    func run() throws {
        let reader = try options.reader
        let existed = try reader.load() != nil
        let state = try reader.plug()
        if existed {
            print("The stub reader is plugged in (\(state.fingers.count) finger(s) enrolled; state: \(reader.path)).")
        } else {
            print("A new stub reader is plugged in, with no fingers enrolled (state: \(reader.path)).")
            print("Add a finger with “vault-fpstub enroll-finger right-index-finger”.")
        }
    }
}

struct Unplug: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Unplug the reader (its fingers and queue are kept).")
    @OptionGroup var options: StateOptions

    func run() throws {
        let reader = try options.reader
        guard try reader.load() != nil else {
            print("There is no stub reader at \(reader.path); nothing to unplug.")
            return
        }
        try reader.unplug()
        print("The stub reader is unplugged. Its fingers are kept; “vault-fpstub plug” plugs it back in.")
    }
}

struct EnrollFinger: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "enroll-finger",
        abstract: "Enroll a finger with a new template (again, if it is enrolled already: that changes the enrollment).")
    @OptionGroup var options: StateOptions
    @Argument(help: "The finger's name, e.g. right-index-finger.")
    var name: String

    func validate() throws { try validateFinger(name) }

    func run() throws {
        let reader = try options.reader
        let again = try reader.load()?.fingers[name] != nil
        let finger = try reader.enrollFinger(name)
        let template = finger.templateID.prefix(8)
        if again {
            print("Enrolled \(name) again, with a new template (\(template)…): the enrollment has changed.")
        } else {
            print("Enrolled \(name) (template \(template)…).")
        }
    }
}

struct RemoveFinger: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "remove-finger", abstract: "Remove an enrolled finger.")
    @OptionGroup var options: StateOptions
    @Argument(help: "The finger's name.")
    var name: String

    func run() throws {
        try options.reader.removeFinger(name)
        print("Removed \(name).")
    }
}

struct List: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show the reader: plugged in or not, fingers, queued scans.")
    @OptionGroup var options: StateOptions
    @Flag(help: "Print JSON.")
    var json = false

    struct Report: Encodable {
        struct Finger: Encodable {
            var name: String
            var template_id: String
        }
        var state: String
        var exists: Bool
        var present: Bool
        var fingers: [Finger]
        var queue: [String]
        var enrollment_digest: String?
    }

    func run() throws {
        let reader = try options.reader
        let state = try reader.load()
        if json {
            let fingers = state?.enrolledFingers ?? []
            let report = Report(
                state: reader.path, exists: state != nil, present: state?.present ?? false,
                fingers: fingers.map { .init(name: $0.name, template_id: $0.templateID) },
                queue: state?.queue.map(\.label) ?? [],
                enrollment_digest: state.map { _ in hex(FingerprintFactor.enrollmentDigest(fingers)) })
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            print(String(decoding: try encoder.encode(report), as: UTF8.self))
            return
        }
        guard let state else {
            print("There is no stub reader (no state file at \(reader.path)). Run “vault-fpstub plug” to plug one in.")
            return
        }
        print("Reader: \(state.present ? "plugged in" : "unplugged")  (state: \(reader.path))")
        if state.fingers.isEmpty {
            print("Fingers: none")
        } else {
            print("Fingers:")
            for f in state.enrolledFingers { print("  \(f.name)  template \(f.templateID)") }
        }
        print("Enrollment digest: \(hex(FingerprintFactor.enrollmentDigest(state.enrolledFingers)))")
        print(state.queue.isEmpty ? "Queued scans: none" : "Queued scans: \(state.queue.map(\.label).joined(separator: ", "))")
    }
}

struct Next: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Queue the outcome of a coming scan (several calls queue in order).",
        discussion: """
            OUTCOME is one of: \(ScriptedScan.Kind.allCases.map(\.rawValue).joined(separator: ", ")). \
            "match" takes an optional finger (default: the first enrolled finger); as on a real sensor, a finger \
            that is not enrolled when the scan happens gives no-match.
            """)
    @OptionGroup var options: StateOptions
    @Argument(help: ArgumentHelp("What the next scan reports.", valueName: "outcome"))
    var outcome: String
    @Argument(help: ArgumentHelp("For match: the finger on the sensor.", valueName: "finger"))
    var finger: String?

    func validate() throws {
        guard let kind = ScriptedScan.Kind(rawValue: outcome) else {
            let known = ScriptedScan.Kind.allCases.map(\.rawValue).joined(separator: ", ")
            throw ValidationError("“\(outcome)” is not a scan outcome. Use one of: \(known).")
        }
        if let finger {
            guard kind == .match else {
                throw ValidationError("Only “match” takes a finger; “\(outcome)” does not.")
            }
            try validateFinger(finger)
        }
    }

    func run() throws {
        let reader = try options.reader
        let scan = ScriptedScan(ScriptedScan.Kind(rawValue: outcome) ?? .match, finger: finger)
        try reader.enqueue(scan)
        let state = try reader.load()
        print("Queued: \(scan.label) (\(state?.queue.count ?? 0) in the queue).")
        if let finger, state?.fingers[finger] == nil {
            print("Note: \(finger) is not enrolled now; unless it is enrolled before the scan, the scan will not match.")
        }
        if state?.present == false {
            print("Note: the reader is unplugged; scans report “disconnected” until “vault-fpstub plug”.")
        }
    }
}

struct Clear: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Empty the queue of scripted scans.")
    @OptionGroup var options: StateOptions

    func run() throws {
        try options.reader.clearQueue()
        print("The scan queue is empty.")
    }
}

struct Reset: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Remove the reader's state: no reader, no fingers, no queue.")
    @OptionGroup var options: StateOptions

    func run() throws {
        let reader = try options.reader
        try reader.reset()
        print("The stub reader is removed (\(reader.path)). “vault-fpstub plug” makes a new one.")
    }
}

func validateFinger(_ name: String) throws {
    do {
        try StubReader.validate(fingerName: name)
    } catch {
        throw ValidationError(error.description)
    }
}

func hex(_ bytes: [UInt8]) -> String {
    bytes.map { b in String(b >> 4, radix: 16) + String(b & 0x0f, radix: 16) }.joined()
}

/// A line on standard error. Not Foundation's FileHandle: vault-fpstub links
/// FoundationEssentials only, so it does not carry ICU's data.
private func printError(_ line: String) {
    let bytes = Array((line + "\n").utf8)
    _ = bytes.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
}

/// vault-fpstub's main (Sources/vault-fpstub, and the one binary in Sources/vaultd).
public func fpstubMain() {
    FPStub.main()
}
