import FoundationEssentials
import VaultFactor
#if canImport(Glibc)
import Glibc
#endif

extension ExternalFactor {
    public static let filePrefix = "vault-factor-"

    /// What `discover` found: the usable plugins, and the ones it refused with why.
    public struct Discovery: Sendable {
        public struct Refusal: Sendable, Equatable, Error, CustomStringConvertible {
            public var path: String
            /// For vaultd's log and `vaultd --check`: what is wrong and how to fix it.
            public var reason: String
            public init(path: String, reason: String) {
                self.path = path
                self.reason = reason
            }
            public var description: String { "\(path): \(reason)" }
        }
        public var factors: [ExternalFactor]
        public var refused: [Refusal]
    }

    /// Finds the `vault-factor-NAME` executables in `directory` and loads each
    /// one that passes the safety checks and answers `probe` in time.
    ///
    /// Refused (and logged, never run): a directory or file that is writable by
    /// its group or others, or owned by anyone but us (or root); a file that is
    /// not a regular executable file (symlinks are followed and their target and
    /// its directory checked the same way); a NAME that is not
    /// `[a-z0-9][a-z0-9_-]{0,31}` or is reserved (pin, fingerprint, oidc,
    /// device); a plugin whose probe fails, hangs or answers garbage. A missing
    /// directory is not an error: it just holds no plugins.
    public static func discover(directory: String, options: Options = Options()) async -> Discovery {
        var refused: [Discovery.Refusal] = []
        func refuse(_ path: String, _ reason: String) {
            refused.append(Discovery.Refusal(path: path, reason: reason))
            options.log(LogRecord(level: .warning, message: "refused plugin", metadata: ["path": path, "reason": reason]))
        }

        var st = stat()
        if stat(directory, &st) != 0 {
            if errno != ENOENT { refuse(directory, "cannot read the plugin directory: \(String(cString: strerror(errno)))") }
            return Discovery(factors: [], refused: refused)
        }
        if let problem = directoryProblem(st, options) {
            refuse(directory, "the plugin directory \(problem); no plugin in it is run")
            return Discovery(factors: [], refused: refused)
        }
        guard let entries = list(directory) else {
            refuse(directory, "cannot list the plugin directory: \(String(cString: strerror(errno)))")
            return Discovery(factors: [], refused: refused)
        }

        var candidates: [String] = []
        for entry in entries.sorted() where entry.hasPrefix(filePrefix) {
            let path = directory.hasSuffix("/") ? directory + entry : directory + "/" + entry
            do {
                _ = try check(executable: path, options: options)
                candidates.append(path)
            } catch {
                refuse(error.path, error.reason)
            }
        }

        // Probe the survivors concurrently: each is bounded by the probe timeout.
        let loaded = await withTaskGroup(of: Result<ExternalFactor, Discovery.Refusal>.self) { group in
            for path in candidates {
                group.addTask {
                    do throws(Discovery.Refusal) {
                        return .success(try await load(executable: path, options: options))
                    } catch {
                        return .failure(error)
                    }
                }
            }
            var out: [Result<ExternalFactor, Discovery.Refusal>] = []
            for await r in group { out.append(r) }
            return out
        }
        var factors: [ExternalFactor] = []
        for r in loaded {
            switch r {
            case .success(let f):
                factors.append(f)
                options.log(LogRecord(level: .info, message: "loaded plugin", metadata: [
                    "plugin": f.name, "path": f.executable, "rank": "\(f.descriptor.rank)",
                    "contribution": f.descriptor.contribution == ContributionKind.lowEntropySecret ? "secret" : "presence"]))
            case .failure(let refusal):
                refuse(refusal.path, refusal.reason)
            }
        }
        factors.sort { ($0.descriptor.rank, $0.name) < ($1.descriptor.rank, $1.name) }
        return Discovery(factors: factors, refused: refused)
    }

    /// Loads one plugin: the safety checks, then `probe` for its descriptor.
    public static func load(executable path: String, options: Options = Options()) async throws(Discovery.Refusal) -> ExternalFactor {
        let (name, resolved) = try check(executable: path, options: options)
        let runner = PluginRunner(name: name, executable: resolved, displayName: LocalizedText(en: name, nb: name), options: options)
        let (result, problem) = await runner.runExplained(.probe, conversation: nil, slot: nil)
        let final: PluginMessage
        switch result {
        case .success(let message):
            final = message
        case .failure(let error):
            let why = problem ?? (error == .timeout ? "it answered timeout" : "it answered with an error: \(error)")
            throw Discovery.Refusal(path: path, reason: "its probe failed: \(why)")
        }
        guard case .descriptor(let d) = final else {
            throw Discovery.Refusal(path: path, reason: "its probe did not answer with a descriptor")
        }
        if !d.available {
            options.log(LogRecord(level: .info, message: "plugin is not available now", metadata: ["plugin": name, "reason": d.reason?.en ?? ""]))
        }
        return ExternalFactor(name: name, executable: resolved, probed: d, options: options)
    }

    /// The safety checks, without running anything. Returns the plugin's name
    /// and the resolved path to run.
    @discardableResult
    public static func check(executable path: String, options: Options = Options()) throws(Discovery.Refusal) -> (name: String, resolved: String) {
        func refusal(_ reason: String) -> Discovery.Refusal { Discovery.Refusal(path: path, reason: reason) }
        let file = path.split(separator: "/").last.map(String.init) ?? ""
        guard file.hasPrefix(filePrefix) else { throw refusal("the file name does not start with \(filePrefix)") }
        let name = String(file.dropFirst(filePrefix.count))
        guard isValidName(name) else {
            throw refusal("“\(name)” is not a valid plugin name: use 1–32 of a–z, 0–9, “-” and “_”, starting with a letter or digit")
        }
        guard !options.reservedNames.contains(name) else {
            throw refusal("“\(name)” is the name of a built-in unlock method; rename the plugin")
        }

        // Check the listed file and, if it is a link, where it leads.
        var lst = stat()
        guard lstat(path, &lst) == 0 else { throw refusal("cannot read it: \(String(cString: strerror(errno)))") }
        var resolved = path
        if lst.st_mode & S_IFMT == S_IFLNK {
            guard let real = realpath(path, nil) else { throw refusal("it is a link that leads nowhere") }
            resolved = String(cString: real)
            free(real)
            // Whoever can write the link's directory can change where it leads.
            let linkParent = parentDirectory(of: path)
            var lpst = stat()
            guard stat(linkParent.isEmpty ? "." : linkParent, &lpst) == 0 else { throw refusal("cannot read its directory") }
            if let problem = directoryProblem(lpst, options) { throw refusal("its directory \(linkParent) \(problem)") }
        }
        var st = stat()
        guard stat(resolved, &st) == 0 else { throw refusal("cannot read it: \(String(cString: strerror(errno)))") }
        guard st.st_mode & S_IFMT == S_IFREG else { throw refusal("it is not a regular file") }
        if let problem = ownershipProblem(st, options) { throw refusal("it \(problem)") }
        guard st.st_mode & (S_IXUSR | S_IXGRP | S_IXOTH) != 0, access(resolved, X_OK) == 0 else {
            throw refusal("it is not executable; run “chmod u+x \(resolved)” if it should be used")
        }
        // The directory holding the file that is actually run.
        let parent = parentDirectory(of: resolved)
        var dst = stat()
        guard stat(parent.isEmpty ? "." : parent, &dst) == 0 else { throw refusal("cannot read its directory") }
        if let problem = directoryProblem(dst, options) { throw refusal("its directory \(parent) \(problem)") }
        return (name, resolved)
    }

    static func isValidName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard (1...32).contains(bytes.count) else { return false }
        func alnum(_ c: UInt8) -> Bool { (c >= 0x61 && c <= 0x7A) || (c >= 0x30 && c <= 0x39) }
        guard alnum(bytes[0]) else { return false }
        return bytes.allSatisfy { alnum($0) || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") }
    }

    private static func directoryProblem(_ st: stat, _ options: Options) -> String? {
        guard st.st_mode & S_IFMT == S_IFDIR else { return "is not a directory" }
        return ownershipProblem(st, options)
    }

    /// Anyone who can write the file or its directory could run code as us.
    private static func ownershipProblem(_ st: stat, _ options: Options) -> String? {
        if !options.trustedOwners.contains(st.st_uid) {
            return "is owned by uid \(st.st_uid), not by this user (uid \(geteuid())) or root; run “chown” to fix it"
        }
        if st.st_mode & (S_IWGRP | S_IWOTH) != 0 {
            let mode = String(st.st_mode & 0o7777, radix: 8)
            return "is writable by its group or by others (mode \(String(repeating: "0", count: max(0, 4 - mode.count)) + mode)); run “chmod go-w” on it"
        }
        return nil
    }
}

/// The names in `directory`, without "." and ".."; nil (errno set) when it cannot be listed.
private func list(_ directory: String) -> [String]? {
    guard let dir = opendir(directory) else { return nil }
    defer { closedir(dir) }
    var names: [String] = []
    errno = 0
    while let entry = readdir(dir) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
        if name != "." && name != ".." { names.append(name) }
    }
    return errno == 0 ? names : nil
}

/// `path` without its last component ("" for a bare name, "/" for a file in the root).
private func parentDirectory(of path: String) -> String {
    guard let slash = path.lastIndex(of: "/") else { return "" }
    return slash == path.startIndex ? "/" : String(path[..<slash])
}
