import Foundation
import VaultTestSupport

/// A hostile neighbour for a real vaultd: `/usr/bin/python3 -c script` in a
/// bubblewrap sandbox made as Flatpak makes one (a root and pid namespace of
/// its own, a `/.flatpak-info` naming `appID`, which vaultd reads to tell who
/// it is), with only vaultd's socket directory bound in. The socket's path is
/// the script's first argument.
func runSandboxed(appID: String, script: String, socketPath: String, scratch: String,
                  timeout: Double = 60) throws -> ProcessOutcome {
    let bwrap = ["/usr/bin/bwrap", "/bin/bwrap"].first { FileManager.default.isExecutableFile(atPath: $0) }
    guard let bwrap else { throw cannotRunHere("bwrap is not installed (apt-get install bubblewrap)") }
    let info = scratch + "/flatpak-info-" + appID
    try "[Application]\nname=\(appID)\n".write(toFile: info, atomically: true, encoding: .utf8)
    let runDir = (socketPath as NSString).deletingLastPathComponent
    return try runProcess(bwrap, ["--die-with-parent", "--unshare-pid", "--tmpfs", "/", "--ro-bind", "/usr", "/usr",
                                  "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/bin", "/bin",
                                  "--ro-bind", info, "/.flatpak-info", "--bind", runDir, runDir, "--proc", "/proc", "--dev", "/dev",
                                  "/usr/bin/python3", "-c", script, socketPath], env: childEnvironment([:]), timeout: timeout)
}
