import SodiumKit

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The device key as 32 raw bytes in a 0600 file. Weaker than the Secret Service (the key
/// sits on the same disk as the data it protects), so only used on explicit request.
public final class FileKeyring: DeviceKeyStore {
    public let kind = "file"
    private let path: String

    /// A 0600 file holding the key (weaker: explicit opt-in with --keyring=file). Created with 0600 in a 0700 dir
    /// (create the dir if missing). Refuses (unsafeFile) a symlink, a file owned by another uid, or a file readable/writable by group/others.
    public init(path: String) {
        self.path = path
    }

    public func loadOrCreate() throws(KeyringError) -> (key: SecureBytes, created: Bool) {
        if let key = try load() { return (key, false) }
        let directory = parentDirectory(of: path)
        try ensureSafeDirectory(directory)
        let key = try makeDeviceKey()
        if try publish(key, in: directory) { return (key, true) }
        // Another process created the file between our load and publish: use theirs.
        guard let existing = try load() else {
            throw .failed("\(path) appeared and vanished while creating the device key")
        }
        return (existing, false)
    }

    public func load() throws(KeyringError) -> SecureBytes? {
        // O_NOFOLLOW refuses a symlink in the last component; O_NONBLOCK keeps a FIFO
        // planted at the path from hanging the open before fstat can reject it.
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)
        if fd < 0 {
            let code = errno
            if code == ENOENT { return nil }
            if code == ELOOP { throw .unsafeFile("\(path) is a symbolic link") }
            throw .failed("cannot open \(path): \(describe(code))")
        }
        defer { close(fd) }

        // Checked on the open descriptor, so the file cannot be swapped after the check.
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw .failed("cannot stat \(path): \(describe(errno))") }
        guard info.st_mode & S_IFMT == S_IFREG else { throw .unsafeFile("\(path) is not a regular file") }
        guard info.st_uid == geteuid() else {
            throw .unsafeFile("\(path) is owned by uid \(info.st_uid), not \(geteuid())")
        }
        guard info.st_mode & 0o077 == 0 else {
            throw .unsafeFile("\(path) has mode \(octal(info.st_mode & 0o777)); group and others must have no access")
        }
        guard info.st_size == deviceKeyLength else {
            throw .failed("\(path) holds \(info.st_size) bytes, expected \(deviceKeyLength)")
        }

        var readError: KeyringError?
        let key: SecureBytes
        do {
            key = try SecureBytes(count: deviceKeyLength) { buffer in
                readError = readFully(fd, into: buffer)
            }
        } catch {
            throw .failed("could not allocate secure memory for the device key: \(error)")
        }
        if let readError { throw readError }
        return key
    }

    public func delete() throws(KeyringError) {
        // Overwriting before unlinking would promise more than journaling and SSD
        // filesystems keep, so the file is simply removed.
        if unlink(path) != 0, errno != ENOENT {
            throw .failed("cannot remove \(path): \(describe(errno))")
        }
    }

    private func readFully(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) -> KeyringError? {
        guard let base = buffer.baseAddress else { return nil }
        var offset = 0
        while offset < buffer.count {
            let n = read(fd, base + offset, buffer.count - offset)
            if n < 0 {
                if errno == EINTR { continue }
                return .failed("cannot read \(path): \(describe(errno))")
            }
            if n == 0 { return .failed("\(path) ended after \(offset) of \(deviceKeyLength) bytes") }
            offset += n
        }
        return nil
    }

    /// Creates the directory (0700, parents too) if missing; refuses one others can write
    /// to, since they could delete the key file and make us silently create a new key.
    private func ensureSafeDirectory(_ directory: String) throws(KeyringError) {
        var info = stat()
        if stat(directory, &info) != 0 {
            guard errno == ENOENT else { throw .failed("cannot stat \(directory): \(describe(errno))") }
            let parent = parentDirectory(of: directory)
            if parent != directory { try ensureSafeDirectory(parent) }
            if mkdir(directory, 0o700) != 0, errno != EEXIST {
                throw .failed("cannot create \(directory): \(describe(errno))")
            }
            guard stat(directory, &info) == 0 else { throw .failed("cannot stat \(directory): \(describe(errno))") }
        }
        guard info.st_mode & S_IFMT == S_IFDIR else { throw .failed("\(directory) is not a directory") }
        guard info.st_uid == geteuid() || info.st_uid == 0 else {
            throw .unsafeFile("\(directory) is owned by uid \(info.st_uid), not \(geteuid())")
        }
        guard info.st_mode & 0o022 == 0 else {
            throw .unsafeFile("\(directory) has mode \(octal(info.st_mode & 0o7777)); group and others must not write to it")
        }
    }

    /// Writes the key to a private temporary file and links it into place. `link` fails
    /// if the name exists, unlike `rename`, so a key another process just created is never
    /// replaced (data sealed under it would be lost). Returns false if the name was taken.
    private func publish(_ key: SecureBytes, in directory: String) throws(KeyringError) -> Bool {
        let temporary = "\(path).tmp-\(getpid())-\(UInt64.random(in: 0...UInt64.max))"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .failed("cannot create \(temporary): \(describe(errno))") }
        defer { unlink(temporary) }

        // The umask can only remove bits; fchmod makes 0600 exact whatever it is.
        var failure: String?
        if fchmod(fd, 0o600) != 0 { failure = "chmod: \(describe(errno))" }
        if failure == nil {
            failure = key.withUnsafeBytes { bytes in writeFully(fd, bytes) }
        }
        if failure == nil, fsync(fd) != 0 { failure = "fsync: \(describe(errno))" }
        if close(fd) != 0, failure == nil { failure = "close: \(describe(errno))" }
        if let failure { throw .failed("cannot write \(temporary): \(failure)") }

        if link(temporary, path) != 0 {
            if errno == EEXIST { return false }
            throw .failed("cannot create \(path): \(describe(errno))")
        }
        // Make the new name durable too, or a crash could lose the key after data was sealed.
        let dirFD = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dirFD >= 0 {
            _ = fsync(dirFD)
            close(dirFD)
        }
        return true
    }
}

/// The audit head in a 0600 file beside the key file (`audit.head`): it shows
/// a truncated or older vault file, not a copy of the whole directory.
extension FileKeyring: AuditHeadStore {
    var auditHeadPath: String { parentDirectory(of: path) + "/audit.head" }

    public func loadAuditHead() throws(KeyringError) -> String? {
        let file = auditHeadPath
        let fd = open(file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)
        if fd < 0 {
            if errno == ENOENT { return nil }
            if errno == ELOOP { throw .unsafeFile("\(file) is a symbolic link") }
            throw .failed("cannot open \(file): \(describe(errno))")
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_uid == geteuid(), info.st_size <= 256 else {
            throw .unsafeFile("\(file) is not a small regular file of ours")
        }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
        let n = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard n == bytes.count else { throw .failed("cannot read \(file)") }
        return String(decoding: bytes, as: UTF8.self)
    }

    public func saveAuditHead(_ text: String) throws(KeyringError) {
        let file = auditHeadPath
        let temporary = "\(file).tmp-\(getpid())-\(UInt64.random(in: 0...UInt64.max))"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .failed("cannot create \(temporary): \(describe(errno))") }
        var failure = Array(text.utf8).withUnsafeBytes { writeFully(fd, $0) }
        if failure == nil, fsync(fd) != 0 { failure = "fsync: \(describe(errno))" }
        if close(fd) != 0, failure == nil { failure = "close: \(describe(errno))" }
        if failure == nil, rename(temporary, file) != 0 { failure = "rename: \(describe(errno))" }
        if let failure {
            unlink(temporary)
            throw .failed("cannot write \(file): \(failure)")
        }
    }
}

private func writeFully(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> String? {
    guard let base = bytes.baseAddress else { return nil }
    var offset = 0
    while offset < bytes.count {
        let n = write(fd, base + offset, bytes.count - offset)
        if n < 0 {
            if errno == EINTR { continue }
            return describe(errno)
        }
        offset += n
    }
    return nil
}

private func parentDirectory(of path: String) -> String {
    guard let slash = path.lastIndex(of: "/") else { return "." }
    if slash == path.startIndex { return "/" }
    return String(path[..<slash])
}

private func describe(_ code: Int32) -> String {
    String(cString: strerror(code))
}

private func octal(_ mode: mode_t) -> String {
    "0" + String(mode, radix: 8)
}
