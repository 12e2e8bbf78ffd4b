#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Runs `body` on a new, detached thread named `name` (at most 15 bytes are
/// kept, the kernel's limit). For blocking work that may take minutes — a
/// pinentry dialog, a GLib main loop, a fingerprint scan — which must hold
/// neither a thread of Swift's cooperative pool nor an event loop.
///
/// A pthread rather than Foundation's `Thread`: the modules that use it then
/// need only FoundationEssentials, and a tool built from them (vault-fpstub)
/// does not carry ICU's 37 MB of data.
///
/// If no thread can be made (the process is at its thread limit), `body` runs
/// on the caller's thread: late rather than never.
public func runOnNewThread(named name: String, _ body: @escaping @Sendable () -> Void) {
    final class Start: @unchecked Sendable {
        let name: String
        let body: @Sendable () -> Void
        init(name: String, body: @escaping @Sendable () -> Void) { self.name = name; self.body = body }
    }
    let start = Unmanaged.passRetained(Start(name: name, body: body)).toOpaque()
    var thread = pthread_t()
    let rc = pthread_create(&thread, nil, { raw in
        guard let raw else { return nil }
        let start = Unmanaged<Start>.fromOpaque(raw).takeRetainedValue()
        _ = setThreadName(pthread_self(), String(start.name.utf8.prefix(15)) ?? "worker")
        start.body()
        return nil
    }, start)
    if rc == 0 {
        pthread_detach(thread)
    } else {
        Unmanaged<Start>.fromOpaque(start).takeRetainedValue().body()
    }
}

// glibc declares it only under _GNU_SOURCE, which the Glibc module is not built with.
@_silgen_name("pthread_setname_np")
private func setThreadName(_ thread: pthread_t, _ name: UnsafePointer<CChar>) -> Int32

/// Awaits `body`'s result, computed on a thread of its own (`runOnNewThread`).
public func onNewThread<T: Sendable>(named name: String, _ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { (continuation: CheckedContinuation<T, Never>) in
        runOnNewThread(named: name) { continuation.resume(returning: body()) }
    }
}
