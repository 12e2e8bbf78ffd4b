// The C libraries vaultd uses, loaded on first use instead of at start-up.
//
// vaultd is also vaultctl and vault-fpstub (Sources/vaultd/main.swift). Linked
// the usual way, every start of any of them would load GIO, GLib, GObject,
// libsecret, libsodium, SQLite and the TPM's ESAPI with their own dependencies and resolve
// their thousands of symbols (Debian builds GLib's with BIND_NOW): about
// 3 ms of vaultctl's start-up, more than the rest of it (docs/benchmarks.md).
// So the functions SessionVault calls are defined here, each forwarding to the
// real one, which it finds the first time it is called (dlopen, dlsym; after
// that one atomic load and an indirect call). Nothing in the binary then needs
// the libraries at start: scripts/build-release takes them out of the release
// vaultd's DT_NEEDED (SwiftPM links pkg-config's libraries ahead of any flag
// Package.swift could give, so --as-needed cannot). vaultd loads each when it
// first uses it; vaultctl never does. Debug builds still list them, loaded at
// start: the calls come here all the same.
//
// Hidden: the definitions satisfy SessionVault's own calls and are never
// exported, so the libraries' calls among their own functions never come here.
// Names in parentheses: GLib defines some (g_str_equal) as macros too. A library
// that cannot be loaded or lacks a function ends the process with a sentence on
// stderr: the package depends on every one, so that is a broken install.
//
// One line per function, in the headers' own words. A function SessionVault
// starts to call and that is missing here makes scripts/build-release fail,
// naming it. scripts/test-package checks that the installed vaultd needs none
// of these libraries at start, that vaultctl loads none of them, and that
// vaultd loads them when used (its keyring, store and sealing all work).

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include <gio/gio.h>
#include <libsecret/secret.h>
// Declarations without libsodium's visibility("default"), which the hidden
// definitions below would contradict. Only here: this file defines them.
#define SODIUM_STATIC 1
#include <sodium.h>
#include <sqlite3.h>
#include <tss2/tss2_esys.h>
#include <tss2/tss2_mu.h>
#include <tss2/tss2_tctildr.h>

#include "LibrariesOnDemand.h"

enum library { GIO, SECRET, SODIUM, SQLITE, ESYS, TCTILDR, MU, LIBRARIES };

static void *library_handle(enum library which) {
    static void *handles[LIBRARIES];
    static const char *const names[LIBRARIES] = {
        "libgio-2.0.so.0", "libsecret-1.so.0", "libsodium.so.23", "libsqlite3.so.0",
        "libtss2-esys.so.0", "libtss2-tctildr.so.0", "libtss2-mu.so.0",
    };
    void *handle = __atomic_load_n(&handles[which], __ATOMIC_ACQUIRE);
    if (handle == NULL) {
        // dlopen is thread-safe and gives every caller the same handle.
        handle = dlopen(names[which], RTLD_NOW | RTLD_LOCAL);
        if (handle == NULL) {
            fprintf(stderr, "sessionvault: %s cannot be loaded (%s); reinstall the sessionvault package\n",
                    names[which], dlerror());
            abort();
        }
        __atomic_store_n(&handles[which], handle, __ATOMIC_RELEASE);
    }
    return handle;
}

static void *resolve(enum library which, const char *name) {
    void *function = dlsym(library_handle(which), name);
    if (function == NULL) {
        fprintf(stderr, "sessionvault: %s is missing from the installed library; update it\n", name);
        abort();
    }
    return function;
}

#define FORWARD_POINTER(library, result, name, parameters)                                   \
    static result(*name##_real) parameters;                                                  \
    result(*real) parameters = __atomic_load_n(&name##_real, __ATOMIC_ACQUIRE);              \
    if (real == NULL) {                                                                      \
        real = (result(*) parameters)resolve(library, #name);                                \
        __atomic_store_n(&name##_real, real, __ATOMIC_RELEASE);                              \
    }

#define FORWARD(library, result, name, parameters, arguments)                                \
    __attribute__((visibility("hidden"))) result(name) parameters {                         \
        FORWARD_POINTER(library, result, name, parameters)                                   \
        return real arguments;                                                               \
    }

#define FORWARD_VOID(library, name, parameters, arguments)                                   \
    __attribute__((visibility("hidden"))) void(name) parameters {                           \
        FORWARD_POINTER(library, void, name, parameters)                                     \
        real arguments;                                                                      \
    }

// GIO, GLib and GObject (through GIO's handle: they are its dependencies).
FORWARD_VOID(GIO, g_cancellable_cancel, (GCancellable *cancellable), (cancellable))
FORWARD(GIO, gboolean, g_cancellable_is_cancelled, (GCancellable *cancellable), (cancellable))
FORWARD(GIO, GCancellable *, g_cancellable_new, (void), ())
FORWARD(GIO, gchar *, g_dbus_address_get_for_bus_sync, (GBusType bus_type, GCancellable *cancellable, GError **error), (bus_type, cancellable, error))
FORWARD(GIO, GVariant *, g_dbus_connection_call_sync, (GDBusConnection *connection, const gchar *bus_name, const gchar *object_path, const gchar *interface_name, const gchar *method_name, GVariant *parameters, const GVariantType *reply_type, GDBusCallFlags flags, gint timeout_msec, GCancellable *cancellable, GError **error), (connection, bus_name, object_path, interface_name, method_name, parameters, reply_type, flags, timeout_msec, cancellable, error))
FORWARD(GIO, gboolean, g_dbus_connection_close_sync, (GDBusConnection *connection, GCancellable *cancellable, GError **error), (connection, cancellable, error))
FORWARD(GIO, GDBusConnection *, g_dbus_connection_new_for_address_sync, (const gchar *address, GDBusConnectionFlags flags, GDBusAuthObserver *observer, GCancellable *cancellable, GError **error), (address, flags, observer, cancellable, error))
FORWARD_VOID(GIO, g_dbus_connection_set_exit_on_close, (GDBusConnection *connection, gboolean exit_on_close), (connection, exit_on_close))
FORWARD(GIO, guint, g_dbus_connection_signal_subscribe, (GDBusConnection *connection, const gchar *sender, const gchar *interface_name, const gchar *member, const gchar *object_path, const gchar *arg0, GDBusSignalFlags flags, GDBusSignalCallback callback, gpointer user_data, GDestroyNotify user_data_free_func), (connection, sender, interface_name, member, object_path, arg0, flags, callback, user_data, user_data_free_func))
FORWARD_VOID(GIO, g_dbus_connection_signal_unsubscribe, (GDBusConnection *connection, guint subscription_id), (connection, subscription_id))
FORWARD(GIO, gchar *, g_dbus_error_get_remote_error, (const GError *error), (error))
FORWARD(GIO, GQuark, g_dbus_error_quark, (void), ())
FORWARD(GIO, gboolean, g_dbus_error_strip_remote_error, (GError *error), (error))
FORWARD_VOID(GIO, g_error_free, (GError *error), (error))
FORWARD_VOID(GIO, g_free, (gpointer mem), (mem))
FORWARD(GIO, gboolean, g_hash_table_insert, (GHashTable *hash_table, gpointer key, gpointer value), (hash_table, key, value))
FORWARD(GIO, GHashTable *, g_hash_table_new_full, (GHashFunc hash_func, GEqualFunc key_equal_func, GDestroyNotify key_destroy_func, GDestroyNotify value_destroy_func), (hash_func, key_equal_func, key_destroy_func, value_destroy_func))
FORWARD_VOID(GIO, g_hash_table_unref, (GHashTable *hash_table), (hash_table))
FORWARD(GIO, GQuark, g_io_error_quark, (void), ())
FORWARD(GIO, GMainContext *, g_main_context_get_thread_default, (void), ())
FORWARD(GIO, gboolean, g_main_context_iteration, (GMainContext *context, gboolean may_block), (context, may_block))
FORWARD(GIO, GMainContext *, g_main_context_new, (void), ())
FORWARD_VOID(GIO, g_main_context_pop_thread_default, (GMainContext *context), (context))
FORWARD_VOID(GIO, g_main_context_push_thread_default, (GMainContext *context), (context))
FORWARD_VOID(GIO, g_main_context_unref, (GMainContext *context), (context))
FORWARD(GIO, GMainLoop *, g_main_loop_new, (GMainContext *context, gboolean is_running), (context, is_running))
FORWARD_VOID(GIO, g_main_loop_run, (GMainLoop *loop), (loop))
FORWARD_VOID(GIO, g_object_unref, (gpointer object), (object))
FORWARD(GIO, const gchar *, g_quark_to_string, (GQuark quark), (quark))
FORWARD(GIO, guint, g_source_attach, (GSource *source, GMainContext *context), (source, context))
FORWARD_VOID(GIO, g_source_destroy, (GSource *source), (source))
FORWARD_VOID(GIO, g_source_set_callback, (GSource *source, GSourceFunc func, gpointer data, GDestroyNotify notify), (source, func, data, notify))
FORWARD_VOID(GIO, g_source_unref, (GSource *source), (source))
FORWARD(GIO, gboolean, g_str_equal, (gconstpointer v1, gconstpointer v2), (v1, v2))
FORWARD(GIO, guint, g_str_hash, (gconstpointer v), (v))
FORWARD(GIO, gchar *, g_strdup, (const gchar *str), (str))
FORWARD(GIO, GSource *, g_timeout_source_new, (guint interval), (interval))
FORWARD(GIO, gboolean, g_variant_get_boolean, (GVariant *value), (value))
FORWARD(GIO, GVariant *, g_variant_get_child_value, (GVariant *value, gsize index_), (value, index_))
FORWARD(GIO, const gchar *, g_variant_get_string, (GVariant *value, gsize *length), (value, length))
FORWARD(GIO, const gchar *, g_variant_get_type_string, (GVariant *value), (value))
FORWARD(GIO, GVariant *, g_variant_get_variant, (GVariant *value), (value))
FORWARD(GIO, gboolean, g_variant_is_container, (GVariant *value), (value))
FORWARD(GIO, gsize, g_variant_n_children, (GVariant *value), (value))
FORWARD(GIO, GVariant *, g_variant_new_string, (const gchar *string), (string))
FORWARD(GIO, GVariant *, g_variant_new_tuple, (GVariant * const *children, gsize n_children), (children, n_children))
FORWARD(GIO, GVariant *, g_variant_new_uint32, (guint32 value), (value))
FORWARD_VOID(GIO, g_variant_unref, (GVariant *value), (value))

// libsecret.
FORWARD(SECRET, SecretCollection *, secret_collection_for_alias_sync, (SecretService *service, const gchar *alias, SecretCollectionFlags flags, GCancellable *cancellable, GError **error), (service, alias, flags, cancellable, error))
FORWARD(SECRET, gboolean, secret_collection_get_locked, (SecretCollection *self), (self))
FORWARD(SECRET, GQuark, secret_error_get_quark, (void), ())
FORWARD(SECRET, gboolean, secret_password_clearv_sync, (const SecretSchema *schema, GHashTable *attributes, GCancellable *cancellable, GError **error), (schema, attributes, cancellable, error))
FORWARD_VOID(SECRET, secret_password_free, (gchar *password), (password))
FORWARD(SECRET, gchar *, secret_password_lookupv_nonpageable_sync, (const SecretSchema *schema, GHashTable *attributes, GCancellable *cancellable, GError **error), (schema, attributes, cancellable, error))
FORWARD(SECRET, gchar *, secret_password_lookupv_sync, (const SecretSchema *schema, GHashTable *attributes, GCancellable *cancellable, GError **error), (schema, attributes, cancellable, error))
FORWARD(SECRET, gboolean, secret_password_storev_sync, (const SecretSchema *schema, GHashTable *attributes, const gchar *collection, const gchar *label, const gchar *password, GCancellable *cancellable, GError **error), (schema, attributes, collection, label, password, cancellable, error))
FORWARD(SECRET, SecretService *, secret_service_get_sync, (SecretServiceFlags flags, GCancellable *cancellable, GError **error), (flags, cancellable, error))

// libsodium.
FORWARD(SODIUM, int, crypto_aead_xchacha20poly1305_ietf_decrypt, (unsigned char *m, unsigned long long *mlen_p, unsigned char *nsec, const unsigned char *c, unsigned long long clen, const unsigned char *ad, unsigned long long adlen, const unsigned char *npub, const unsigned char *k), (m, mlen_p, nsec, c, clen, ad, adlen, npub, k))
FORWARD(SODIUM, int, crypto_aead_xchacha20poly1305_ietf_encrypt, (unsigned char *c, unsigned long long *clen_p, const unsigned char *m, unsigned long long mlen, const unsigned char *ad, unsigned long long adlen, const unsigned char *nsec, const unsigned char *npub, const unsigned char *k), (c, clen_p, m, mlen, ad, adlen, nsec, npub, k))
FORWARD(SODIUM, int, crypto_box_seal, (unsigned char *c, const unsigned char *m, unsigned long long mlen, const unsigned char *pk), (c, m, mlen, pk))
FORWARD(SODIUM, int, crypto_box_seal_open, (unsigned char *m, const unsigned char *c, unsigned long long clen, const unsigned char *pk, const unsigned char *sk), (m, c, clen, pk, sk))
FORWARD(SODIUM, size_t, crypto_box_sealbytes, (void), ())
FORWARD(SODIUM, int, crypto_box_seed_keypair, (unsigned char *pk, unsigned char *sk, const unsigned char *seed), (pk, sk, seed))
FORWARD(SODIUM, int, crypto_generichash, (unsigned char *out, size_t outlen, const unsigned char *in, unsigned long long inlen, const unsigned char *key, size_t keylen), (out, outlen, in, inlen, key, keylen))
FORWARD(SODIUM, int, crypto_hash_sha256, (unsigned char *out, const unsigned char *in, unsigned long long inlen), (out, in, inlen))
FORWARD(SODIUM, int, crypto_hash_sha512, (unsigned char *out, const unsigned char *in, unsigned long long inlen), (out, in, inlen))
FORWARD(SODIUM, int, crypto_pwhash, (unsigned char * const out, unsigned long long outlen, const char * const passwd, unsigned long long passwdlen, const unsigned char * const salt, unsigned long long opslimit, size_t memlimit, int alg), (out, outlen, passwd, passwdlen, salt, opslimit, memlimit, alg))
FORWARD_VOID(SODIUM, randombytes_buf, (void * const buf, const size_t size), (buf, size))
FORWARD(SODIUM, int, sodium_base642bin, (unsigned char * const bin, const size_t bin_maxlen, const char * const b64, const size_t b64_len, const char * const ignore, size_t * const bin_len, const char ** const b64_end, const int variant), (bin, bin_maxlen, b64, b64_len, ignore, bin_len, b64_end, variant))
FORWARD(SODIUM, char *, sodium_bin2base64, (char * const b64, const size_t b64_maxlen, const unsigned char * const bin, const size_t bin_len, const int variant), (b64, b64_maxlen, bin, bin_len, variant))
FORWARD_VOID(SODIUM, sodium_free, (void *ptr), (ptr))
FORWARD(SODIUM, int, sodium_init, (void), ())
FORWARD(SODIUM, void *, sodium_malloc, (const size_t size), (size))
FORWARD(SODIUM, int, sodium_memcmp, (const void * const b1_, const void * const b2_, size_t len), (b1_, b2_, len))
FORWARD_VOID(SODIUM, sodium_memzero, (void * const pnt, const size_t len), (pnt, len))

// SQLite.
FORWARD(SQLITE, int, sqlite3_bind_blob, (sqlite3_stmt *statement, int index, const void *value, int count, void (*destructor)(void *)), (statement, index, value, count, destructor))
FORWARD(SQLITE, int, sqlite3_bind_double, (sqlite3_stmt *statement, int index, double value), (statement, index, value))
FORWARD(SQLITE, int, sqlite3_bind_int64, (sqlite3_stmt *statement, int index, sqlite3_int64 value), (statement, index, value))
FORWARD(SQLITE, int, sqlite3_bind_null, (sqlite3_stmt *statement, int index), (statement, index))
FORWARD(SQLITE, int, sqlite3_bind_text, (sqlite3_stmt *statement, int index, const char *value, int count, void (*destructor)(void *)), (statement, index, value, count, destructor))
FORWARD(SQLITE, int, sqlite3_bind_zeroblob, (sqlite3_stmt *statement, int index, int count), (statement, index, count))
FORWARD(SQLITE, int, sqlite3_busy_timeout, (sqlite3 *db, int milliseconds), (db, milliseconds))
FORWARD(SQLITE, sqlite3_int64, sqlite3_changes64, (sqlite3 *db), (db))
FORWARD(SQLITE, int, sqlite3_clear_bindings, (sqlite3_stmt *statement), (statement))
FORWARD(SQLITE, int, sqlite3_close, (sqlite3 *db), (db))
FORWARD(SQLITE, int, sqlite3_close_v2, (sqlite3 *db), (db))
FORWARD(SQLITE, const void *, sqlite3_column_blob, (sqlite3_stmt *statement, int column), (statement, column))
FORWARD(SQLITE, int, sqlite3_column_bytes, (sqlite3_stmt *statement, int column), (statement, column))
FORWARD(SQLITE, double, sqlite3_column_double, (sqlite3_stmt *statement, int column), (statement, column))
FORWARD(SQLITE, sqlite3_int64, sqlite3_column_int64, (sqlite3_stmt *statement, int column), (statement, column))
FORWARD(SQLITE, const unsigned char *, sqlite3_column_text, (sqlite3_stmt *statement, int column), (statement, column))
FORWARD(SQLITE, int, sqlite3_column_type, (sqlite3_stmt *statement, int column), (statement, column))
FORWARD(SQLITE, int, sqlite3_exec, (sqlite3 *db, const char *sql, int (*callback)(void *, int, char **, char **), void *context, char **message), (db, sql, callback, context, message))
FORWARD(SQLITE, int, sqlite3_extended_errcode, (sqlite3 *db), (db))
FORWARD(SQLITE, int, sqlite3_extended_result_codes, (sqlite3 *db, int on), (db, on))
FORWARD(SQLITE, int, sqlite3_finalize, (sqlite3_stmt *statement), (statement))
FORWARD(SQLITE, int, sqlite3_get_autocommit, (sqlite3 *db), (db))
FORWARD(SQLITE, sqlite3_int64, sqlite3_last_insert_rowid, (sqlite3 *db), (db))
FORWARD(SQLITE, int, sqlite3_open_v2, (const char *filename, sqlite3 **db, int flags, const char *vfs), (filename, db, flags, vfs))
FORWARD(SQLITE, int, sqlite3_prepare_v3, (sqlite3 *db, const char *sql, int count, unsigned int flags, sqlite3_stmt **statement, const char **tail), (db, sql, count, flags, statement, tail))
FORWARD(SQLITE, int, sqlite3_reset, (sqlite3_stmt *statement), (statement))
FORWARD(SQLITE, int, sqlite3_step, (sqlite3_stmt *statement), (statement))

// The TPM 2.0 software stack (Sources/TPMSeal): ESAPI, its TCTI loader, marshalling.
FORWARD(ESYS, TSS2_RC, Esys_Create, (ESYS_CONTEXT *esysContext, ESYS_TR parentHandle, ESYS_TR shandle1, ESYS_TR shandle2, ESYS_TR shandle3, const TPM2B_SENSITIVE_CREATE *inSensitive, const TPM2B_PUBLIC *inPublic, const TPM2B_DATA *outsideInfo, const TPML_PCR_SELECTION *creationPCR, TPM2B_PRIVATE **outPrivate, TPM2B_PUBLIC **outPublic, TPM2B_CREATION_DATA **creationData, TPM2B_DIGEST **creationHash, TPMT_TK_CREATION **creationTicket), (esysContext, parentHandle, shandle1, shandle2, shandle3, inSensitive, inPublic, outsideInfo, creationPCR, outPrivate, outPublic, creationData, creationHash, creationTicket))
FORWARD(ESYS, TSS2_RC, Esys_CreatePrimary, (ESYS_CONTEXT *esysContext, ESYS_TR primaryHandle, ESYS_TR shandle1, ESYS_TR shandle2, ESYS_TR shandle3, const TPM2B_SENSITIVE_CREATE *inSensitive, const TPM2B_PUBLIC *inPublic, const TPM2B_DATA *outsideInfo, const TPML_PCR_SELECTION *creationPCR, ESYS_TR *objectHandle, TPM2B_PUBLIC **outPublic, TPM2B_CREATION_DATA **creationData, TPM2B_DIGEST **creationHash, TPMT_TK_CREATION **creationTicket), (esysContext, primaryHandle, shandle1, shandle2, shandle3, inSensitive, inPublic, outsideInfo, creationPCR, objectHandle, outPublic, creationData, creationHash, creationTicket))
FORWARD_VOID(ESYS, Esys_Finalize, (ESYS_CONTEXT **context), (context))
FORWARD(ESYS, TSS2_RC, Esys_FlushContext, (ESYS_CONTEXT *esysContext, ESYS_TR flushHandle), (esysContext, flushHandle))
FORWARD_VOID(ESYS, Esys_Free, (void *__ptr), (__ptr))
FORWARD(ESYS, TSS2_RC, Esys_GetCapability, (ESYS_CONTEXT *esysContext, ESYS_TR shandle1, ESYS_TR shandle2, ESYS_TR shandle3, TPM2_CAP capability, UINT32 property, UINT32 propertyCount, TPMI_YES_NO *moreData, TPMS_CAPABILITY_DATA **capabilityData), (esysContext, shandle1, shandle2, shandle3, capability, property, propertyCount, moreData, capabilityData))
FORWARD(ESYS, TSS2_RC, Esys_Initialize, (ESYS_CONTEXT **esys_context, TSS2_TCTI_CONTEXT *tcti, TSS2_ABI_VERSION *abiVersion), (esys_context, tcti, abiVersion))
FORWARD(ESYS, TSS2_RC, Esys_Load, (ESYS_CONTEXT *esysContext, ESYS_TR parentHandle, ESYS_TR shandle1, ESYS_TR shandle2, ESYS_TR shandle3, const TPM2B_PRIVATE *inPrivate, const TPM2B_PUBLIC *inPublic, ESYS_TR *objectHandle), (esysContext, parentHandle, shandle1, shandle2, shandle3, inPrivate, inPublic, objectHandle))
FORWARD(ESYS, TSS2_RC, Esys_StartAuthSession, (ESYS_CONTEXT *esysContext, ESYS_TR tpmKey, ESYS_TR bind, ESYS_TR shandle1, ESYS_TR shandle2, ESYS_TR shandle3, const TPM2B_NONCE *nonceCaller, TPM2_SE sessionType, const TPMT_SYM_DEF *symmetric, TPMI_ALG_HASH authHash, ESYS_TR *sessionHandle), (esysContext, tpmKey, bind, shandle1, shandle2, shandle3, nonceCaller, sessionType, symmetric, authHash, sessionHandle))
FORWARD(ESYS, TSS2_RC, Esys_TR_SetAuth, (ESYS_CONTEXT *esysContext, ESYS_TR handle, TPM2B_AUTH const *authValue), (esysContext, handle, authValue))
FORWARD(ESYS, TSS2_RC, Esys_TRSess_SetAttributes, (ESYS_CONTEXT *esysContext, ESYS_TR session, TPMA_SESSION flags, TPMA_SESSION mask), (esysContext, session, flags, mask))
FORWARD(ESYS, TSS2_RC, Esys_Unseal, (ESYS_CONTEXT *esysContext, ESYS_TR itemHandle, ESYS_TR shandle1, ESYS_TR shandle2, ESYS_TR shandle3, TPM2B_SENSITIVE_DATA **outData), (esysContext, itemHandle, shandle1, shandle2, shandle3, outData))
FORWARD_VOID(TCTILDR, Tss2_TctiLdr_Finalize, (TSS2_TCTI_CONTEXT **context), (context))
FORWARD(TCTILDR, TSS2_RC, Tss2_TctiLdr_Initialize, (const char *nameConf, TSS2_TCTI_CONTEXT **context), (nameConf, context))
FORWARD(MU, TSS2_RC, Tss2_MU_TPM2B_PRIVATE_Marshal, (TPM2B_PRIVATE const *src, uint8_t buffer[], size_t buffer_size, size_t *offset), (src, buffer, buffer_size, offset))
FORWARD(MU, TSS2_RC, Tss2_MU_TPM2B_PRIVATE_Unmarshal, (uint8_t const buffer[], size_t buffer_size, size_t *offset, TPM2B_PRIVATE *dest), (buffer, buffer_size, offset, dest))
FORWARD(MU, TSS2_RC, Tss2_MU_TPM2B_PUBLIC_Marshal, (TPM2B_PUBLIC const *src, uint8_t buffer[], size_t buffer_size, size_t *offset), (src, buffer, buffer_size, offset))
FORWARD(MU, TSS2_RC, Tss2_MU_TPM2B_PUBLIC_Unmarshal, (uint8_t const buffer[], size_t buffer_size, size_t *offset, TPM2B_PUBLIC *dest), (buffer, buffer_size, offset, dest))
