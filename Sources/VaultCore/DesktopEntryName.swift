import FoundationEssentials
import VaultProtocol

/// The name the desktop shows for an app: the `Name` of its `.desktop` entry,
/// in the person's language, so that a dialog says “Aktivitetslogg” where the
/// identity is `org.example.Aktivitetslogg`. Only for an identity something
/// other than the app vouches for (a Flatpak, a Snap, a desktop scope): an app
/// known by its program alone gets no name from a file it could have written.
///
/// Where the entries are (the XDG base directory and desktop entry specs, and
/// where Flatpak and snapd export theirs, which a desktop session adds to
/// `XDG_DATA_DIRS` but a user service may not have):
/// `$XDG_DATA_HOME/flatpak/exports/share`, `/var/lib/flatpak/exports/share`,
/// `/var/lib/snapd/desktop`, `$XDG_DATA_HOME`, then `$XDG_DATA_DIRS`, each
/// with `applications/ID.desktop` (a Snap's is `NAME_APP.desktop`).
public struct DesktopEntryName: Sendable {
    /// The `applications` directories, in the order they are searched.
    public let directories: [String]

    /// vaultd's, read from its environment once.
    public static let ofThisProcess = DesktopEntryName()

    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 }
        let dataHome = environment["XDG_DATA_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? home.map { $0 + "/.local/share" }
        let dataDirs = (environment["XDG_DATA_DIRS"].flatMap { $0.isEmpty ? nil : $0 } ?? "/usr/local/share:/usr/share")
            .split(separator: ":").map(String.init).filter { $0.hasPrefix("/") }
        var roots: [String] = []
        if let dataHome { roots.append(dataHome + "/flatpak/exports/share") }
        roots += ["/var/lib/flatpak/exports/share", "/var/lib/snapd/desktop"]
        if let dataHome { roots.append(dataHome) }
        roots += dataDirs
        var seen = Set<String>()
        directories = roots.map { $0 + "/applications" }.filter { seen.insert($0).inserted }
    }

    public init(directories: [String]) {
        self.directories = directories
    }

    /// The app's `.desktop` name in `language`, or nil (no entry, no name, an
    /// app known only by its program).
    public func name(of app: AppIdentity, language: Language) -> String? {
        switch app.kind {
        case .executable:
            return nil
        case .flatpak, .desktop:
            guard AppIdentity.plausibleID(app.name) else { return nil }
            for dir in directories {
                if let text = AppIdentity.read("\(dir)/\(app.name).desktop"), let name = Self.name(in: text, language: language) {
                    return name
                }
            }
            return nil
        case .snap:
            // snapd names them NAME_APP.desktop; the app named like the snap first.
            for dir in directories {
                let prefix = app.name + "_"
                guard let files = try? FileManager.default.contentsOfDirectory(atPath: dir) else { continue }
                let entries = files.filter { $0.hasPrefix(prefix) && $0.hasSuffix(".desktop") }
                    .sorted { ($0 == prefix + app.name + ".desktop" ? 0 : 1, $0) < ($1 == prefix + app.name + ".desktop" ? 0 : 1, $1) }
                for file in entries {
                    if let text = AppIdentity.read("\(dir)/\(file)"), let name = Self.name(in: text, language: language) { return name }
                }
            }
            return nil
        }
    }

    /// `Name` of the `[Desktop Entry]` group, localized: for bokmål
    /// `Name[nb_NO]`, `Name[nb]`, `Name[no]`, then `Name`. Nil when the entry
    /// is `Hidden` or has no usable name (empty, or longer than 80
    /// characters). Dialogs pass it through `Messages.shown` like any name
    /// from outside.
    static func name(in text: String, language: Language) -> String? {
        let wanted: [String] = language == .nb ? ["Name[nb_NO]", "Name[nb]", "Name[no]", "Name"] : ["Name[en]", "Name"]
        var group = ""
        var found: [String: String] = [:]
        for raw in text.split(whereSeparator: \.isNewline) {
            let line = raw.trimmingSpaces
            if line.hasPrefix("[") {
                group = line
                continue
            }
            guard group == "[Desktop Entry]", !line.hasPrefix("#"), let eq = line.firstIndex(of: "=") else { continue }
            let key = line[..<eq].trimmingSpaces
            let value = line[line.index(after: eq)...].trimmingSpaces
            // Hidden=true means “deleted” (the spec); NoDisplay apps keep their names.
            if key == "Hidden" && value == "true" { return nil }
            if found[key] == nil { found[key] = value }
        }
        for key in wanted {
            if let value = found[key], !value.isEmpty, value.count <= 80 { return value }
        }
        return nil
    }
}
