import CSecret
import SodiumKit

/// The device key in the user's Secret Service keyring (gnome-keyring, KeePassXC, …),
/// reached through libsecret. One item per vault, found by schema + `vault` attribute.
public final class SecretServiceKeyring: DeviceKeyStore {
    public let kind = "secret-service"
    private let vault: String

    /// `vault` distinguishes several vaults of one user (an attribute on the item); default "default".
    public init(vault: String = "default") {
        self.vault = vault
    }

    public func loadOrCreate() throws(KeyringError) -> (key: SecureBytes, created: Bool) {
        if let key = try load() { return (key, false) }
        try store(makeDeviceKey())
        // Read back instead of returning the fresh key: if the keyring dropped the item,
        // or another process stored one in between (store replaces), the key we hand out
        // must be the one the keyring will return next time, or sealed data is lost.
        guard let key = try load() else {
            throw .failed("the Secret Service accepted the device key but does not return it")
        }
        return (key, true)
    }

    public func load() throws(KeyringError) -> SecureBytes? {
        var error: UnsafeMutablePointer<GError>?
        // The nonpageable variant keeps the base64 text in libsecret's locked memory.
        let text = withVaultAttributes(vault) { attributes in
            secret_password_lookupv_nonpageable_sync(deviceKeySchema, attributes, nil, &error)
        }
        if let error {
            if let text { secret_password_free(text) }
            throw consume(error, during: "lookup")
        }
        guard let text else {
            // A locked collection answers "no such item" rather than an error; saying
            // "none stored" then would let loadOrCreate try to replace a key it cannot see.
            if try defaultCollectionIsLocked() { throw .locked }
            return nil
        }
        // secret_password_free wipes the text before freeing it.
        defer { secret_password_free(text) }
        let key: SecureBytes
        do {
            key = try SecureBytes.fromBase64(text)
        } catch {
            throw .failed("the stored device key is not valid base64 (\(error))")
        }
        guard key.count == deviceKeyLength else {
            throw .failed("the stored device key has \(key.count) bytes, expected \(deviceKeyLength)")
        }
        return key
    }

    public func delete() throws(KeyringError) {
        var error: UnsafeMutablePointer<GError>?
        let removed = withVaultAttributes(vault) { attributes in
            secret_password_clearv_sync(deviceKeySchema, attributes, nil, &error)
        }
        if let error { throw consume(error, during: "clear") }
        // FALSE without an error means nothing was removed, which is also what a locked
        // collection answers while the item stays in it. Reporting success then would let
        // `vaultctl wipe` claim a key is gone that is not.
        if removed == 0, try defaultCollectionIsLocked() { throw .locked }
    }

    private func store(_ key: SecureBytes) throws(KeyringError) {
        var error: UnsafeMutablePointer<GError>?
        let stored: gboolean
        do {
            stored = try key.withBase64CString { text in
                withVaultAttributes(vault) { attributes in
                    secret_password_storev_sync(deviceKeySchema, attributes, SECRET_COLLECTION_DEFAULT,
                                                "SessionVault device key", text, nil, &error)
                }
            }
        } catch {
            throw .failed("could not encode the device key: \(error)")
        }
        if let error { throw consume(error, during: "store") }
        if stored == 0 { throw .failed("store: the Secret Service refused the item without saying why") }
    }

    private func defaultCollectionIsLocked() throws(KeyringError) -> Bool {
        var error: UnsafeMutablePointer<GError>?
        guard let service = secret_service_get_sync(SECRET_SERVICE_NONE, nil, &error) else {
            if let error { throw consume(error, during: "connect") }
            throw .failed("connect: libsecret returned no service and no error")
        }
        defer { g_object_unref(service) }
        let collection = secret_collection_for_alias_sync(service, SECRET_COLLECTION_DEFAULT,
                                                          SECRET_COLLECTION_NONE, nil, &error)
        if let error {
            if let collection { g_object_unref(collection) }
            throw consume(error, during: "read the default collection")
        }
        // No default collection at all: nothing can be locked, and nothing is stored.
        guard let collection else { return false }
        defer { g_object_unref(collection) }
        return secret_collection_get_locked(collection) != 0
    }
}

/// The audit head: a second item per vault, under its own schema so that a
/// lookup of one never returns the other.
extension SecretServiceKeyring: AuditHeadStore {
    public func loadAuditHead() throws(KeyringError) -> String? {
        var error: UnsafeMutablePointer<GError>?
        let text = withVaultAttributes(vault) { attributes in
            secret_password_lookupv_sync(auditHeadSchema, attributes, nil, &error)
        }
        if let error {
            if let text { secret_password_free(text) }
            throw consume(error, during: "lookup audit head")
        }
        guard let text else {
            if try defaultCollectionIsLocked() { throw .locked }
            return nil
        }
        defer { secret_password_free(text) }
        return String(cString: text)
    }

    public func saveAuditHead(_ text: String) throws(KeyringError) {
        var error: UnsafeMutablePointer<GError>?
        let stored = withVaultAttributes(vault) { attributes in
            text.withCString { value in
                secret_password_storev_sync(auditHeadSchema, attributes, SECRET_COLLECTION_DEFAULT,
                                            "SessionVault audit log head", value, nil, &error)
            }
        }
        if let error { throw consume(error, during: "store audit head") }
        if stored == 0 { throw .failed("store audit head: the Secret Service refused the item without saying why") }
    }
}

/// libsecret treats a schema whose `reserved` field is 0 as static: it keeps the bare
/// pointer in its async state instead of copying it. So the schema is built once and never
/// freed. It is never written after creation, which makes sharing it across threads sound.
nonisolated(unsafe) private let deviceKeySchema = vaultSchema("org.sessionvault.DeviceKey")
nonisolated(unsafe) private let auditHeadSchema = vaultSchema("org.sessionvault.AuditHead")

/// A schema named `name` with the one attribute `vault`.
private func vaultSchema(_ name: StaticString) -> UnsafeMutablePointer<SecretSchema> {
    let schema = UnsafeMutablePointer<SecretSchema>.allocate(capacity: 1)
    schema.initialize(to: SecretSchema())
    // Static strings live for the whole process, so libsecret may keep these pointers.
    schema.pointee.name = cString(name)
    schema.pointee.flags = SECRET_SCHEMA_NONE
    // The C array of 32 attributes imports as a tuple; an unnamed entry ends the list.
    withUnsafeMutableBytes(of: &schema.pointee.attributes) { raw in
        let attributes = raw.bindMemory(to: SecretSchemaAttribute.self)
        attributes[0] = SecretSchemaAttribute(name: cString("vault"), type: SECRET_SCHEMA_ATTRIBUTE_STRING)
    }
    return schema
}

private func cString(_ text: StaticString) -> UnsafePointer<CChar> {
    UnsafeRawPointer(text.utf8Start).assumingMemoryBound(to: CChar.self)
}

/// The attribute table for one vault's item. The table owns copies of its strings.
private func withVaultAttributes<R>(_ vault: String, _ body: (OpaquePointer?) -> R) -> R {
    let table = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free)
    defer { g_hash_table_unref(table) }
    g_hash_table_insert(table, g_strdup("vault"), g_strdup(vault))
    return body(table)
}

/// Classifies and frees a GError. The first three rules are the failures seen
/// against a real gnome-keyring and D-Bus (and checked by KeyringTests): a locked
/// collection (`secret-error` 2, IS_LOCKED), no bus (`g-io-error-quark`), and a
/// bus without a Secret Service (`g-dbus-error-quark` 2); each comes back at once.
private func consume(_ error: UnsafeMutablePointer<GError>, during operation: String) -> KeyringError {
    defer { g_error_free(error) }
    let domain = error.pointee.domain
    let code = error.pointee.code
    let text = error.pointee.message.map { String(cString: $0) } ?? "no message"
    let domainName = g_quark_to_string(domain).map { String(cString: $0) } ?? "unknown-domain"
    let detail = "\(operation): \(text) (\(domainName) \(code))"

    if domain == secret_error_get_quark(), code == Int32(SECRET_ERROR_IS_LOCKED.rawValue) {
        return .locked
    }
    if domain == g_io_error_quark(), ioUnavailableCodes.contains(code) {
        return .unavailable(detail)
    }
    if domain == g_dbus_error_quark(), dbusUnavailableCodes.contains(code) {
        return .unavailable(detail)
    }
    return .failed(detail)
}

/// Connection-level failures: no bus address (FAILED, e.g. "cannot autolaunch without
/// X11"), a socket that is gone (NOT_FOUND) or refuses us, or a bus that went away.
private let ioUnavailableCodes: Set<Int32> = [
    G_IO_ERROR_FAILED, G_IO_ERROR_NOT_FOUND, G_IO_ERROR_CONNECTION_REFUSED,
    G_IO_ERROR_CLOSED, G_IO_ERROR_BROKEN_PIPE, G_IO_ERROR_NOT_CONNECTED,
].map { Int32($0.rawValue) }.reduce(into: []) { $0.insert($1) }

/// The bus answered but nobody provides the Secret Service, or activating one failed
/// (a keyring package installed but unable to start is still "no keyring" to a person).
private let dbusUnavailableCodes: Set<Int32> = {
    var codes: Set<Int32> = [
        G_DBUS_ERROR_SERVICE_UNKNOWN, G_DBUS_ERROR_NAME_HAS_NO_OWNER, G_DBUS_ERROR_NO_SERVER,
        G_DBUS_ERROR_BAD_ADDRESS, G_DBUS_ERROR_DISCONNECTED,
    ].map { Int32($0.rawValue) }.reduce(into: []) { $0.insert($1) }
    for code in G_DBUS_ERROR_SPAWN_EXEC_FAILED.rawValue...G_DBUS_ERROR_SPAWN_NO_MEMORY.rawValue {
        codes.insert(Int32(code))
    }
    return codes
}()
