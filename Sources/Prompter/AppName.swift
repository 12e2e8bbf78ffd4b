import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import VaultCore
import VaultProtocol

/// The name a dialog gives the app that is asking: its identity as read when
/// the connection opened (`AppIdentity`: a Flatpak or Snap name, a desktop
/// app id, else the executable's file name; inside a sandbox the executable
/// says little, often `python3` or `bwrap`), shown as the desktop names it
/// (its `.desktop` entry's `Name`, `DesktopEntryName`) when it has one.
public enum AppName {
    public static func of(_ requester: Requester, language: Language, procRoot: String = "/proc",
                          entries: DesktopEntryName = .ofThisProcess) -> String? {
        if let app = requester.app { return display(app, language: language, entries: entries) }
        guard requester.pid > 0 else { return nil }
        if let app = AppIdentity.of(pid: requester.pid, procRoot: procRoot), app.kind != .executable {
            return display(app, language: language, entries: entries)
        }
        // A fixture's requester carries its executable instead of a /proc entry.
        guard let exe = requester.executable else { return nil }
        return AppIdentity(kind: .executable, name: exe).shortName
    }

    /// `app` as a dialog names it: its desktop name, else its short name.
    public static func display(_ app: AppIdentity, language: Language, entries: DesktopEntryName = .ofThisProcess) -> String {
        entries.name(of: app, language: language) ?? app.shortName
    }
}
