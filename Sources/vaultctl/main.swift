import VaultctlProgram

vaultctlMain()
