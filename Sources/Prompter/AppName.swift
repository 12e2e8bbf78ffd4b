import Foundation
import VaultCore

/// The name a dialog gives the app that is asking: its identity as read when
/// the connection opened (`AppIdentity`: a Flatpak or Snap name, a desktop
/// app id, else the executable's file name; inside a sandbox the executable
/// says little, often `python3` or `bwrap`).
public enum AppName {
    public static func of(_ requester: Requester, procRoot: String = "/proc") -> String? {
        if let app = requester.app { return app.shortName }
        guard requester.pid > 0 else { return nil }
        if let app = AppIdentity.of(pid: requester.pid, procRoot: procRoot), app.kind != .executable { return app.shortName }
        // A fixture's requester carries its executable instead of a /proc entry.
        guard let exe = requester.executable else { return nil }
        return AppIdentity(kind: .executable, name: exe).shortName
    }
}
