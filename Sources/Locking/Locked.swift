#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A value behind a pthread mutex: the one lock type of SessionVault.
///
/// Why not the standard library's `Synchronization.Mutex`: on Linux it is a
/// priority-inheriting futex, and when it is contended the kernel hands the
/// lock straight to a waiter. No user-space atomic marks that hand-over, so
/// ThreadSanitizer sees no happens-before edge and reports races that are not
/// there (eight threads on one `Mutex` are enough; CI's TSan run met it on the
/// session table). TSan intercepts pthread mutexes, so with this type a race
/// it reports is a real one. The cost is one uncontended `pthread_mutex_lock`,
/// tens of nanoseconds.
///
/// Give it a value with a size: `Locked(())` as a bare mutex puts a zero-sized
/// value at the address just past `mutex`, and ThreadSanitizer reported the
/// lock's read of its own field as racing with `withLock`'s access to the
/// value (CI, session 18). Lock what you guard, or count what you do under it.
public final class Locked<Value>: @unchecked Sendable {
    // Allocated once and never moved: a pthread mutex must keep its address.
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>
    @usableFromInline var value: Value

    public init(_ value: sending Value) {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        // Default attributes cannot fail to initialize on Linux.
        pthread_mutex_init(mutex, nil)
        self.value = value
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with the value, holding the lock. `body` must not call back
    /// into this lock: it is not recursive.
    @inlinable
    public func withLock<Result, E: Error>(_ body: (inout sending Value) throws(E) -> sending Result) throws(E) -> sending Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
