// The C libraries vaultd uses, loaded on first use (LibrariesOnDemand.c says
// why). Nothing to call: the functions SessionVault uses from GIO, GLib,
// libsecret, libsodium, SQLite and the TPM's libtss2 are defined in LibrariesOnDemand.c, and
// linking this target is all it takes.
