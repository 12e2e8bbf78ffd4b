import FPStubProgram
import VaultctlProgram
import VaultdProgram

// One binary, three programs, told apart by the name they were started as
// (as udevadm and systemd-udevd are one file). The Debian package installs
// this as /usr/bin/vaultd and links /usr/bin/vaultctl and
// /usr/lib/sessionvault/vault-fpstub to it: one copy of the Swift runtime on
// disk instead of three (docs/operations.md, "Why the package is this size").
// A development build also has vaultctl and vault-fpstub on their own.
switch CommandLine.arguments.first?.split(separator: "/").last {
case "vaultctl": vaultctlMain()
case "vault-fpstub": fpstubMain()
default: await vaultdMain()
}
