// Sealing a small secret in the TPM (docs/key-hierarchy.md, "Bound to this
// computer"), as systemd-cryptenroll does for LUKS:
//
// - The parent is the owner hierarchy's ECC P-256 storage primary from the
//   standard template, made again on every call (deterministic while the
//   owner seed stays: a cleared TPM or another chip makes another key, and a
//   blob made under the old one fails its integrity check). Its noDA is set:
//   its own (empty) auth is not a guess.
// - The sealed object is a KEYEDHASH data object whose userAuth is the caller's
//   `auth`. With `guess_protected` its noDA is clear, so each wrong auth counts
//   towards the TPM's lockout (TPM2_PT_MAX_AUTH_FAIL); the TPM, not vaultd,
//   then decides the pace of guessing.
// - Create and Unseal run in an HMAC session salted with the primary's key and
//   with parameter encryption (AES-128-CFB) both ways: the auth value is only
//   ever used in an HMAC, and neither the secret going in nor the secret coming
//   out crosses the bus to the TPM in clear.
//
// Every call opens its own TCTI and ESAPI context and flushes what it loaded:
// without a resource manager (swtpm) nothing would flush transient objects.

#include <string.h>

#include <tss2/tss2_esys.h>
#include <tss2/tss2_mu.h>
#include <tss2/tss2_tctildr.h>

#include "tpm_seal.h"

// "SVT1", then the marshalled TPM2B_PUBLIC and TPM2B_PRIVATE.
static const uint8_t blob_magic[4] = {'S', 'V', 'T', '1'};

// A TSS2_RC of our own for a blob that is not ours or does not fit: the
// "bad value" code of the ESAPI layer, which callers map like any other.
#define BLOB_RC (TSS2_ESAPI_RC_LAYER | TSS2_BASE_RC_BAD_VALUE)

struct connection {
    TSS2_TCTI_CONTEXT *tcti;
    ESYS_CONTEXT *esys;
    ESYS_TR primary;
    ESYS_TR session;
    ESYS_TR object;
};

static void disconnect(struct connection *c) {
    if (c->esys != NULL) {
        if (c->object != ESYS_TR_NONE) Esys_FlushContext(c->esys, c->object);
        if (c->session != ESYS_TR_NONE) Esys_FlushContext(c->esys, c->session);
        if (c->primary != ESYS_TR_NONE) Esys_FlushContext(c->esys, c->primary);
        Esys_Finalize(&c->esys);
    }
    if (c->tcti != NULL) Tss2_TctiLdr_Finalize(&c->tcti);
}

static TSS2_RC connect_tpm(const char *tcti, struct connection *c) {
    memset(c, 0, sizeof *c);
    c->primary = c->session = c->object = ESYS_TR_NONE;
    TSS2_RC rc = Tss2_TctiLdr_Initialize(tcti, &c->tcti);
    if (rc != TSS2_RC_SUCCESS) return rc;
    return Esys_Initialize(&c->esys, c->tcti, NULL);
}

// The standard ECC storage primary (TCG's "SRK" template), noDA.
static TSS2_RC create_primary(struct connection *c) {
    TPM2B_SENSITIVE_CREATE sensitive = {0};
    TPM2B_PUBLIC template = {
        .publicArea = {
            .type = TPM2_ALG_ECC,
            .nameAlg = TPM2_ALG_SHA256,
            .objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN |
                                TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT |
                                TPMA_OBJECT_NODA,
            .parameters.eccDetail = {
                .symmetric = {.algorithm = TPM2_ALG_AES, .keyBits.aes = 128, .mode.aes = TPM2_ALG_CFB},
                .scheme = {.scheme = TPM2_ALG_NULL},
                .curveID = TPM2_ECC_NIST_P256,
                .kdf = {.scheme = TPM2_ALG_NULL},
            },
        },
    };
    TPM2B_DATA outside = {0};
    TPML_PCR_SELECTION pcrs = {0};
    return Esys_CreatePrimary(c->esys, ESYS_TR_RH_OWNER, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &sensitive,
                              &template, &outside, &pcrs, &c->primary, NULL, NULL, NULL, NULL);
}

// An HMAC session salted with the primary, encrypting the first command
// parameter (`decrypt`) and the first response parameter (`encrypt`).
static TSS2_RC start_session(struct connection *c, TPMA_SESSION parameter_encryption) {
    TPMT_SYM_DEF symmetric = {.algorithm = TPM2_ALG_AES, .keyBits.aes = 128, .mode.aes = TPM2_ALG_CFB};
    TSS2_RC rc = Esys_StartAuthSession(c->esys, c->primary, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
                                       NULL, TPM2_SE_HMAC, &symmetric, TPM2_ALG_SHA256, &c->session);
    if (rc != TSS2_RC_SUCCESS) return rc;
    return Esys_TRSess_SetAttributes(c->esys, c->session, TPMA_SESSION_CONTINUESESSION | parameter_encryption, 0xff);
}

uint32_t tpm_seal(const char *tcti, const uint8_t *secret, size_t secret_len, const uint8_t *auth, size_t auth_len,
                  int guess_protected, uint8_t *blob, size_t blob_cap, size_t *blob_len) {
    TPM2B_SENSITIVE_CREATE sensitive = {0};
    if (secret_len > sizeof sensitive.sensitive.data.buffer || auth_len > sizeof sensitive.sensitive.userAuth.buffer ||
        blob_cap < sizeof blob_magic) {
        return BLOB_RC;
    }
    struct connection c;
    TSS2_RC rc = connect_tpm(tcti, &c);
    if (rc == TSS2_RC_SUCCESS) rc = create_primary(&c);
    if (rc == TSS2_RC_SUCCESS) rc = start_session(&c, TPMA_SESSION_DECRYPT);
    TPM2B_PRIVATE *private = NULL;
    TPM2B_PUBLIC *public = NULL;
    if (rc == TSS2_RC_SUCCESS) {
        sensitive.sensitive.userAuth.size = (UINT16)auth_len;
        memcpy(sensitive.sensitive.userAuth.buffer, auth, auth_len);
        sensitive.sensitive.data.size = (UINT16)secret_len;
        memcpy(sensitive.sensitive.data.buffer, secret, secret_len);
        TPM2B_PUBLIC template = {
            .publicArea = {
                .type = TPM2_ALG_KEYEDHASH,
                .nameAlg = TPM2_ALG_SHA256,
                .objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_USERWITHAUTH |
                                    (guess_protected ? 0 : TPMA_OBJECT_NODA),
                .parameters.keyedHashDetail.scheme.scheme = TPM2_ALG_NULL,
            },
        };
        TPM2B_DATA outside = {0};
        TPML_PCR_SELECTION pcrs = {0};
        rc = Esys_Create(c.esys, c.primary, c.session, ESYS_TR_NONE, ESYS_TR_NONE, &sensitive, &template, &outside,
                         &pcrs, &private, &public, NULL, NULL, NULL);
        explicit_bzero(&sensitive, sizeof sensitive);
    }
    if (rc == TSS2_RC_SUCCESS) {
        size_t offset = sizeof blob_magic;
        memcpy(blob, blob_magic, sizeof blob_magic);
        rc = Tss2_MU_TPM2B_PUBLIC_Marshal(public, blob, blob_cap, &offset);
        if (rc == TSS2_RC_SUCCESS) rc = Tss2_MU_TPM2B_PRIVATE_Marshal(private, blob, blob_cap, &offset);
        if (rc == TSS2_RC_SUCCESS) *blob_len = offset;
    }
    Esys_Free(private);
    Esys_Free(public);
    disconnect(&c);
    return rc;
}

// The blob's two halves, or BLOB_RC when it is not a blob tpm_seal made.
static TSS2_RC parse_blob(const uint8_t *blob, size_t blob_len, TPM2B_PUBLIC *public, TPM2B_PRIVATE *private) {
    size_t offset = sizeof blob_magic;
    if (blob_len < sizeof blob_magic || memcmp(blob, blob_magic, sizeof blob_magic) != 0 ||
        Tss2_MU_TPM2B_PUBLIC_Unmarshal(blob, blob_len, &offset, public) != TSS2_RC_SUCCESS ||
        Tss2_MU_TPM2B_PRIVATE_Unmarshal(blob, blob_len, &offset, private) != TSS2_RC_SUCCESS || offset != blob_len) {
        return BLOB_RC;
    }
    return TSS2_RC_SUCCESS;
}

// Connects, makes the primary and loads the blob under it into `c->object`.
static TSS2_RC load_blob(const char *tcti, const uint8_t *blob, size_t blob_len, struct connection *c) {
    TPM2B_PUBLIC public = {0};
    TPM2B_PRIVATE private = {0};
    TSS2_RC rc = connect_tpm(tcti, c);
    if (rc == TSS2_RC_SUCCESS) rc = parse_blob(blob, blob_len, &public, &private);
    if (rc == TSS2_RC_SUCCESS) rc = create_primary(c);
    if (rc == TSS2_RC_SUCCESS) {
        rc = Esys_Load(c->esys, c->primary, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &private, &public, &c->object);
    }
    return rc;
}

uint32_t tpm_seal_check(const char *tcti, const uint8_t *blob, size_t blob_len) {
    struct connection c;
    TSS2_RC rc = load_blob(tcti, blob, blob_len, &c);
    disconnect(&c);
    return rc;
}

uint32_t tpm_unseal(const char *tcti, const uint8_t *blob, size_t blob_len, const uint8_t *auth, size_t auth_len,
                    uint8_t *secret, size_t secret_cap, size_t *secret_len) {
    TPM2B_AUTH value = {0};
    if (auth_len > sizeof value.buffer) return BLOB_RC;
    value.size = (UINT16)auth_len;
    memcpy(value.buffer, auth, auth_len);

    struct connection c;
    TSS2_RC rc = load_blob(tcti, blob, blob_len, &c);
    if (rc == TSS2_RC_SUCCESS) rc = Esys_TR_SetAuth(c.esys, c.object, &value);
    explicit_bzero(&value, sizeof value);
    if (rc == TSS2_RC_SUCCESS) rc = start_session(&c, TPMA_SESSION_ENCRYPT);
    TPM2B_SENSITIVE_DATA *data = NULL;
    if (rc == TSS2_RC_SUCCESS) rc = Esys_Unseal(c.esys, c.object, c.session, ESYS_TR_NONE, ESYS_TR_NONE, &data);
    if (rc == TSS2_RC_SUCCESS) {
        if (data->size > secret_cap) {
            rc = BLOB_RC;
        } else {
            memcpy(secret, data->buffer, data->size);
            *secret_len = data->size;
        }
        explicit_bzero(data->buffer, sizeof data->buffer);
    }
    Esys_Free(data);
    disconnect(&c);
    return rc;
}

uint32_t tpm_seal_status(const char *tcti, struct tpm_seal_status *out) {
    memset(out, 0, sizeof *out);
    struct connection c;
    TSS2_RC rc = connect_tpm(tcti, &c);
    TPMS_CAPABILITY_DATA *data = NULL;
    if (rc == TSS2_RC_SUCCESS) {
        rc = Esys_GetCapability(c.esys, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, TPM2_CAP_TPM_PROPERTIES,
                                TPM2_PT_PERMANENT, TPM2_PT_LOCKOUT_RECOVERY - TPM2_PT_PERMANENT + 1, NULL, &data);
    }
    if (rc == TSS2_RC_SUCCESS) {
        const TPML_TAGGED_TPM_PROPERTY *list = &data->data.tpmProperties;
        for (UINT32 i = 0; i < list->count; i++) {
            UINT32 value = list->tpmProperty[i].value;
            switch (list->tpmProperty[i].property) {
            case TPM2_PT_PERMANENT:
                out->lockout_auth_set = (value & TPMA_PERMANENT_LOCKOUTAUTHSET) != 0;
                out->in_lockout = (value & TPMA_PERMANENT_INLOCKOUT) != 0;
                break;
            case TPM2_PT_LOCKOUT_COUNTER: out->lockout_counter = value; break;
            case TPM2_PT_MAX_AUTH_FAIL: out->max_tries = value; break;
            case TPM2_PT_LOCKOUT_INTERVAL: out->interval = value; break;
            case TPM2_PT_LOCKOUT_RECOVERY: out->recovery = value; break;
            default: break;
            }
        }
    }
    Esys_Free(data);
    disconnect(&c);
    return rc;
}
