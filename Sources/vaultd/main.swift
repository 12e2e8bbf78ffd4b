import FPStubProgram
import VaultdProgram

// One binary, two programs, told apart by the name they were started as
// (as udevadm and systemd-udevd are one file). The Debian package installs
// this as /usr/bin/vaultd and links /usr/lib/sessionvault/vault-fpstub to it:
// one copy of the Swift runtime on disk instead of two (docs/operations.md,
// "Why the package is this size"). vaultctl is its own small static
// executable: it must start fast, and needs none of vaultd's libraries.
// A development build also has vault-fpstub on its own.
switch CommandLine.arguments.first?.split(separator: "/").last {
case "vault-fpstub": fpstubMain()
default: await vaultdMain()
}
