import Foundation
import VaultCore

/// The name a dialog gives the app that is asking: its Flatpak app id when it
/// runs sandboxed (the executable inside a sandbox says little: often
/// `python3` or `bwrap`), otherwise its executable's name.
public enum AppName {
    public static func of(_ requester: Requester, procRoot: String = "/proc") -> String? {
        guard requester.pid > 0 else { return nil }
        if let info = try? String(contentsOfFile: "\(procRoot)/\(requester.pid)/root/.flatpak-info", encoding: .utf8),
           let id = flatpakAppID(info) {
            return id
        }
        guard let exe = requester.executable, let name = exe.split(separator: "/").last else { return nil }
        // A replaced binary shows as “name (deleted)”.
        return String(name.hasSuffix(" (deleted)") ? name.dropLast(10) : name)
    }

    /// `name=` in the `[Application]` group of a .flatpak-info key file.
    static func flatpakAppID(_ info: String) -> String? {
        var group = ""
        for raw in info.split(whereSeparator: \.isNewline) {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.hasPrefix("[") { group = line; continue }
            if group == "[Application]", line.hasPrefix("name=") {
                let id = String(line.dropFirst(5)).trimmingCharacters(in: .whitespaces)
                // App ids are reverse-DNS names; anything else is not shown.
                let allowed = id.unicodeScalars.allSatisfy { CharacterSet.alphanumerics.contains($0) || "._-".unicodeScalars.contains($0) }
                return !id.isEmpty && id.count <= 255 && allowed ? id : nil
            }
        }
        return nil
    }
}
