// Sealing a small secret in this computer's TPM 2.0, through ESAPI
// (tpm_seal.c says how). Every function opens its own connection to the TPM
// (the TCTI named by `tcti`, e.g. "device:/dev/tpmrm0" or "swtpm:path=S"),
// flushes every object it loaded and closes it again: nothing stays in the
// TPM, and no ESAPI context is shared between threads.
#ifndef TPM_SEAL_H
#define TPM_SEAL_H

#include <stddef.h>
#include <stdint.h>

// The most a sealed blob can take (a marshalled TPM2B_PUBLIC and TPM2B_PRIVATE).
#define TPM_SEAL_BLOB_MAX 1024
// The most a sealed secret can be (TPM2B_SENSITIVE_DATA holds 128 bytes).
#define TPM_SEAL_SECRET_MAX 128

// Seals `secret` under `auth` as a child of the owner hierarchy's ECC storage
// primary. `guess_protected`: the TPM counts wrong `auth` values against its
// dictionary-attack lockout (a PIN); 0 for a high-entropy `auth`.
// Returns a TSS2_RC (0: `blob` holds `*blob_len` bytes).
uint32_t tpm_seal(const char *tcti, const uint8_t *secret, size_t secret_len, const uint8_t *auth, size_t auth_len,
                  int guess_protected, uint8_t *blob, size_t blob_cap, size_t *blob_len);

// Opens a blob tpm_seal made, with `auth`. Returns a TSS2_RC (0: `secret` holds
// `*secret_len` bytes; the caller wipes them).
uint32_t tpm_unseal(const char *tcti, const uint8_t *blob, size_t blob_len, const uint8_t *auth, size_t auth_len,
                    uint8_t *secret, size_t secret_cap, size_t *secret_len);

// Loads a blob tpm_seal made, without its auth (so no guess is counted), and
// unloads it: TPM2_RC_INTEGRITY when another chip, or this one before it was
// cleared, sealed it. Returns a TSS2_RC.
uint32_t tpm_seal_check(const char *tcti, const uint8_t *blob, size_t blob_len);

struct tpm_seal_status {
    uint32_t lockout_counter;   // wrong answers counted now
    uint32_t max_tries;         // TPM2_PT_MAX_AUTH_FAIL
    uint32_t interval;          // seconds for one count to be forgiven
    uint32_t recovery;          // seconds after a lockout-auth failure
    int in_lockout;             // the TPM refuses every guess-protected object now
    int lockout_auth_set;       // the machine's owner armed the lockout (else anyone can reset it)
};

// The TPM's dictionary-attack state. Returns a TSS2_RC.
uint32_t tpm_seal_status(const char *tcti, struct tpm_seal_status *out);

#endif
