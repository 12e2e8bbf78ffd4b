#ifndef VAULT_SHIMS_H
#define VAULT_SHIMS_H
/// prctl(2) is variadic and cannot be called from Swift; this wraps the one call we need.
/// Returns 0 on success, -1 with errno set on failure.
int sv_set_not_dumpable(void);
#endif
