#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// File-system checks made before SQLite sees the path.
///
/// SQLite follows symlinks and creates files with the process umask, so the
/// store pins down the file itself first: the parent directory and the file
/// must not be symlinks and must belong to us, and a new file is created 0600
/// by us (SQLite then gives -wal and -shm the database file's mode). Only the
/// last directory is checked, not every ancestor: distributions legitimately
/// put $HOME behind a symlink (/home -> /var/home), and an attacker who owns an
/// ancestor of our home directory has already won.
enum PathGuard {
    struct Identity: Equatable {
        var device: UInt64
        var inode: UInt64
    }

    struct OpenedFile {
        var fd: Int32
        var created: Bool
        var size: Int64
        var identity: Identity
    }

    static func errnoText(_ code: Int32) -> String {
        String(cString: strerror(code))
    }

    static func isType(_ mode: mode_t, _ type: mode_t) -> Bool {
        (mode & mode_t(S_IFMT)) == type
    }

    /// Makes sure `dir` is a real directory owned by us, creating it (and any
    /// missing ancestors) with mode 0700 if needed.
    static func prepareDirectory(_ dir: String) throws(StoreError) {
        var st = stat()
        if lstat(dir, &st) == 0 {
            try checkDirectory(dir, st)
            return
        }
        let code = errno
        guard code == ENOENT else {
            throw .unreadable("cannot inspect directory \(dir): \(errnoText(code))")
        }
        // Missing: create the parent first (it too may be missing).
        let parent = parentDirectory(of: dir)
        if parent != dir {
            var parentStat = stat()
            if lstat(parent, &parentStat) != 0 {
                try prepareDirectory(parent)
            }
        }
        if mkdir(dir, 0o700) != 0 {
            let mkdirCode = errno
            if mkdirCode != EEXIST {
                if mkdirCode == EROFS || mkdirCode == ENOSPC || mkdirCode == EDQUOT {
                    throw .io("cannot create directory \(dir): \(errnoText(mkdirCode))")
                }
                throw .unreadable("cannot create directory \(dir): \(errnoText(mkdirCode))")
            }
        } else {
            // mkdir's mode is filtered through the umask; say exactly 0700.
            _ = chmod(dir, 0o700)
            syncDirectory(parent)
        }
        // Re-check: whatever is there now (ours, or a racing creator's) must pass.
        guard lstat(dir, &st) == 0 else {
            throw .unreadable("cannot inspect directory \(dir): \(errnoText(errno))")
        }
        try checkDirectory(dir, st)
    }

    private static func checkDirectory(_ dir: String, _ st: stat) throws(StoreError) {
        if isType(st.st_mode, mode_t(S_IFLNK)) {
            throw .unsafePath("\(dir) is a symlink")
        }
        guard isType(st.st_mode, mode_t(S_IFDIR)) else {
            throw .unsafePath("\(dir) is not a directory")
        }
        guard st.st_uid == geteuid() else {
            throw .unsafePath("\(dir) is owned by uid \(st.st_uid), not \(geteuid())")
        }
    }

    /// Linux's O_PATH (not exported by Swift's Glibc module, which lacks
    /// _GNU_SOURCE); the same value on every architecture Swift supports.
    /// Closing an O_PATH descriptor does not drop the process's POSIX locks on
    /// the file, which closing an ordinary descriptor would: SQLite's locks,
    /// if this process already has the store open (the classic way to corrupt
    /// an SQLite database from inside the same process).
    #if os(Linux)
    static let pinFlags: Int32 = 0o10000000 | O_NOFOLLOW | O_CLOEXEC
    #else
    static let pinFlags: Int32 = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK
    #endif

    /// Checks (or creates, 0600) the database file without following a
    /// symlink: it must be a regular file owned by us. Returns a descriptor
    /// that pins the inode, kept until SQLite has opened the path so that the
    /// caller can check that SQLite got the same file.
    static func openDatabaseFile(_ path: String) throws(StoreError) -> OpenedFile {
        var created = false
        var fd = open(path, pinFlags)
        if fd < 0 {
            let code = errno
            switch code {
            case ELOOP:
                throw .unsafePath("\(path) is a symlink")
            case ENOENT:
                created = try createFile(path)
            default:
                throw .unreadable("cannot open \(path): \(errnoText(code))")
            }
            fd = open(path, pinFlags)
            guard fd >= 0 else {
                let again = errno
                if again == ELOOP { throw .unsafePath("\(path) is a symlink") }
                throw .unreadable("cannot open \(path): \(errnoText(again))")
            }
        }
        var st = stat()
        guard fstat(fd, &st) == 0 else {
            let code = errno
            release(fd)
            throw .unreadable("cannot inspect \(path): \(errnoText(code))")
        }
        if isType(st.st_mode, mode_t(S_IFLNK)) {
            release(fd)
            throw .unsafePath("\(path) is a symlink")
        }
        guard isType(st.st_mode, mode_t(S_IFREG)) else {
            release(fd)
            throw .unsafePath("\(path) is not a regular file")
        }
        guard st.st_uid == geteuid() else {
            release(fd)
            throw .unsafePath("\(path) is owned by uid \(st.st_uid), not \(geteuid())")
        }
        return OpenedFile(
            fd: fd, created: created, size: Int64(st.st_size),
            identity: Identity(device: UInt64(st.st_dev), inode: UInt64(st.st_ino)))
    }

    /// Creates an empty 0600 file; false if someone else created it first.
    private static func createFile(_ path: String) throws(StoreError) -> Bool {
        // O_EXCL + O_NOFOLLOW: never create through a symlink someone slipped in.
        let fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            let code = errno
            switch code {
            case EEXIST:
                return false  // lost a race: the caller inspects what is there
            case EROFS, ENOSPC, EDQUOT:
                throw .io("cannot create \(path): \(errnoText(code))")
            default:
                throw .unreadable("cannot create \(path): \(errnoText(code))")
            }
        }
        // The umask may have narrowed 0600 further; say exactly 0600. Closing is
        // safe here: nobody has the new, empty file open yet.
        _ = fchmod(fd, 0o600)
        _ = fsync(fd)
        release(fd)
        syncDirectory(parentDirectory(of: path))
        return true
    }

    /// A -wal or -shm file, if present, must pass the same checks as the
    /// database: SQLite would follow a planted symlink and write through it.
    static func checkSidecar(_ path: String) throws(StoreError) {
        var st = stat()
        guard lstat(path, &st) == 0 else {
            let code = errno
            if code == ENOENT { return }
            throw .unreadable("cannot inspect \(path): \(errnoText(code))")
        }
        if isType(st.st_mode, mode_t(S_IFLNK)) {
            throw .unsafePath("\(path) is a symlink")
        }
        guard isType(st.st_mode, mode_t(S_IFREG)) else {
            throw .unsafePath("\(path) is not a regular file")
        }
        guard st.st_uid == geteuid() else {
            throw .unsafePath("\(path) is owned by uid \(st.st_uid), not \(geteuid())")
        }
    }

    /// Narrows an existing file of ours to 0600 (a file copied in, or created
    /// under a loose umask by an older build). Missing files are fine.
    /// By path, not through a descriptor: closing a descriptor would drop
    /// SQLite's POSIX locks if this process has the store open (see pinFlags),
    /// and O_PATH descriptors cannot be chmod'ed. Just checked to be a regular
    /// file, in a directory only we can write.
    static func restrictMode(_ path: String) {
        var st = stat()
        guard lstat(path, &st) == 0, isType(st.st_mode, mode_t(S_IFREG)), st.st_uid == geteuid() else { return }
        if st.st_mode & 0o7077 != 0 {
            _ = chmod(path, 0o600)
        }
    }

    /// The identity of whatever is at `path` now, without following a symlink.
    static func identity(of path: String) -> Identity? {
        var st = stat()
        guard lstat(path, &st) == 0 else { return nil }
        return Identity(device: UInt64(st.st_dev), inode: UInt64(st.st_ino))
    }

    static func release(_ fd: Int32) {
        _ = close(fd)
    }

    static func parentDirectory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        if slash == path.startIndex { return "/" }
        return String(path[path.startIndex..<slash])
    }

    /// Makes a new directory entry durable: without this a power cut right
    /// after creation can lose the file even though its contents were synced.
    static func syncDirectory(_ dir: String) {
        let fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        _ = fsync(fd)
        close(fd)
    }
}
