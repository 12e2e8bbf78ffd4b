import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// Which app a client process is, read once per connection from its pid
/// (docs/threat-model.md, "Apps and their grants"). Grants are kept per
/// identity; dialogs and `vaultctl apps` show it.
///
/// In order of trust:
/// - `flatpak`: `[Application] name` in `/proc/PID/root/.flatpak-info`, a
///   file the sandboxed app cannot write;
/// - `snap`: the `snap.NAME.…` cgroup snapd put it in;
/// - `desktop`: the systemd scope or service the desktop started it in
///   (`app-gnome-NAME-PID.scope`, `app-flatpak-ID-PID.scope`, `app-NAME@RANDOM.service`);
///   everything that app starts (a terminal's shells) shares it;
/// - `executable`: only the path of `/proc/PID/exe`, *unverified*: any
///   process of the same user can run that program, or pretend to be it.
public struct AppIdentity: Sendable, Hashable, CustomStringConvertible {
    public enum Kind: String, Sendable, CaseIterable {
        case flatpak
        case snap
        case desktop
        case executable
    }

    public var kind: Kind
    public var name: String

    public init(kind: Kind, name: String) {
        self.kind = kind
        self.name = name
    }

    /// An identity as a person names it: `KIND:NAME`, or a program's absolute path.
    public init?(named text: String) {
        if text.hasPrefix("/") {
            self.init(kind: .executable, name: text)
            return
        }
        guard let colon = text.firstIndex(of: ":"), let kind = Kind(rawValue: String(text[..<colon])) else { return nil }
        let name = String(text[text.index(after: colon)...])
        guard !name.isEmpty else { return nil }
        self.init(kind: kind, name: name)
    }

    /// Whether something other than the process itself vouches for the name.
    public var verified: Bool { kind != .executable }

    /// The grant key: kind and name, so a Flatpak id and an executable path never collide.
    public var key: String { "\(kind.rawValue):\(name)" }

    public var description: String { key }

    /// A short name for a dialog: the app id, or the executable's file name.
    public var shortName: String {
        guard kind == .executable, let last = name.split(separator: "/").last else { return name }
        // A replaced binary shows as “name (deleted)”.
        return String(last.hasSuffix(" (deleted)") ? last.dropLast(10) : last)
    }

    /// The peer `pid`'s identity under `procRoot`; nil when nothing can be
    /// read (the process is gone).
    public static func of(pid: Int32, procRoot: String = "/proc") -> AppIdentity? {
        guard pid > 0 else { return nil }
        // The process's directory is looked up once; its files relative to it
        // (this runs for every connection).
        let base = open("\(procRoot)/\(pid)", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard base >= 0 else { return nil }
        defer { close(base) }
        if let info = read("root/.flatpak-info", in: base), let id = flatpakAppID(info) {
            return AppIdentity(kind: .flatpak, name: id)
        }
        if let cgroup = read("cgroup", in: base), let found = fromCgroup(cgroup) {
            return found
        }
        return executable(at: "exe", in: base).map { AppIdentity(kind: .executable, name: $0) }
    }

    /// The target of an `exe` link (a fixture may make it a plain link to any path).
    static func executable(at link: String, in dir: Int32 = AT_FDCWD) -> String? {
        var buf = [CChar](repeating: 0, count: 4096)
        let n = readlinkat(dir, link, &buf, buf.count - 1)
        guard n > 0 else { return nil }
        return String(decoding: buf[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// A small file's text, or nil (at most 64 KiB: these files are tiny).
    /// Plain `open`/`read`: this runs for every connection (FileHandle's
    /// buffering and objects were 15% of vaultd's time per connect).
    /// `dir`: the directory a relative `path` is in (default: the working directory).
    static func read(_ path: String, in dir: Int32 = AT_FDCWD) -> String? {
        let fd = openat(dir, path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        let limit = 65_536
        var bytes = [UInt8](repeating: 0, count: 4096)
        var count = 0
        while count < limit {
            if count == bytes.count { bytes += [UInt8](repeating: 0, count: min(bytes.count, limit - count)) }
            let n = bytes.withUnsafeMutableBytes { buffer in
                Glibc.read(fd, buffer.baseAddress.map { $0 + count }, buffer.count - count)
            }
            if n == 0 { break }
            if n < 0 {
                if errno == EINTR { continue }
                return nil
            }
            count += n
        }
        return String(decoding: bytes[0..<count], as: UTF8.self)
    }

    /// `name=` in the `[Application]` group of a .flatpak-info key file.
    public static func flatpakAppID(_ info: String) -> String? {
        var group = ""
        for raw in info.split(whereSeparator: \.isNewline) {
            let line = raw.trimmingSpaces
            if line.hasPrefix("[") { group = line; continue }
            if group == "[Application]", line.hasPrefix("name=") {
                let id = line.dropFirst(5).trimmingSpaces
                return plausibleID(id) ? id : nil
            }
        }
        return nil
    }

    /// App ids are reverse-DNS-like names; anything else (a newline, a quote,
    /// a path) is not shown in a dialog or kept as a grant.
    static func plausibleID(_ id: String) -> Bool {
        !id.isEmpty && id.utf8.count <= 255
            && id.unicodeScalars.allSatisfy { ("a" ... "z").contains($0) || ("A" ... "Z").contains($0) || ("0" ... "9").contains($0) || "._-+".unicodeScalars.contains($0) }
    }

    /// A Snap or a desktop-started app, from `/proc/PID/cgroup`: the unified
    /// hierarchy's line (`0::PATH`) first, then systemd's v1 line.
    /// Read per connection, so it works on the bytes: a Character-by-Character
    /// split of cgroup v1's dozen lines was a tenth of a connection's cost.
    static func fromCgroup(_ text: String) -> AppIdentity? {
        var paths: [Substring] = []
        let colon = UInt8(ascii: ":")
        for line in text.utf8.split(separator: UInt8(ascii: "\n")) {
            let fields = line.split(separator: colon, maxSplits: 2, omittingEmptySubsequences: false)
            guard fields.count == 3 else { continue }
            let path = Substring(fields[2])
            if fields[0].elementsEqual("0".utf8) && fields[1].isEmpty { paths.insert(path, at: 0) }
            else if fields[1].elementsEqual("name=systemd".utf8) { paths.append(path) }
        }
        for path in paths {
            // The innermost unit names the app; slices above it (app.slice) do not.
            for unit in path.split(separator: "/").reversed() {
                if let found = fromUnit(String(unit)) { return found }
            }
        }
        return nil
    }

    /// `snap.NAME.APP…` → snap NAME; `app-[LAUNCHER-]ID-RANDOM.scope` and
    /// `app-[LAUNCHER-]ID[@RANDOM].service` (systemd's desktop-environment
    /// naming) → desktop ID, where ID has its dashes escaped as `\x2d`.
    static func fromUnit(_ unit: String) -> AppIdentity? {
        if unit.hasPrefix("snap.") {
            let parts = unit.split(separator: ".")
            guard parts.count >= 3, plausibleID(String(parts[1])) else { return nil }
            return AppIdentity(kind: .snap, name: String(parts[1]))
        }
        guard unit.hasPrefix("app-") else { return nil }
        var rest: Substring
        if unit.hasSuffix(".scope") {
            rest = unit.dropFirst(4).dropLast(6)
            // A scope always ends in a random or pid part.
            guard let dash = rest.lastIndex(of: "-") else { return nil }
            rest = rest[..<dash]
        } else if unit.hasSuffix(".service") {
            rest = unit.dropFirst(4).dropLast(8)
            if let at = rest.firstIndex(of: "@") { rest = rest[..<at] }
        } else {
            return nil
        }
        // What is left is ID or LAUNCHER-ID; the ID's own dashes are escaped.
        let parts = rest.split(separator: "-", omittingEmptySubsequences: false)
        guard let last = parts.last, parts.count <= 2 else { return nil }
        let id = String(last.replacing("\\x2d", with: "-"))
        guard plausibleID(id) else { return nil }
        return AppIdentity(kind: .desktop, name: id)
    }
}
