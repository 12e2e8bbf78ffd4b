import CVaultShims
import Logging
import NIOCore
import VaultCore
import VaultProtocol
#if canImport(Glibc)
import Glibc
#endif

/// vaultd's listening socket, and the connections that have asked for nothing
/// but sessions the vault can release at once: ssh-agent's whole job, done as
/// ssh-agent does it, with one thread, one poll set and plain system calls.
///
/// Why: a NIO channel costs about 40 µs to set up and tear down on a 2-core
/// machine (a bare NIO server answers connect + request + reply in 65 µs, a
/// bare epoll loop in 25 µs), and most apps connect, ask for their token and
/// go. docs/benchmarks.md has the figures.
///
/// The lane answers a read only when it holds exactly one whole line, and that
/// line is a `session` request the vault can release without waiting
/// (`Vault.releaseIfFresh`). Anything else hands the connection to the NIO
/// server (`ConnectionHandler`) with the bytes read so far, and it stays
/// there: `hello`, an answer to a prompt, a token that is due, a locked vault,
/// any error, a partial or pipelined read, another uid, a connection over the
/// limit. So the lane holds no partial line, prompt or task, and every answer
/// but a released session comes from one place.
final class ReleaseLane: @unchecked Sendable {
    // @unchecked: everything mutable below is touched only on the lane's own
    // thread; other threads only call `stop`, which writes to `wake`.
    typealias HandOff = @Sendable (_ fd: CInt, _ what: ConnectionHandler.HandOver) -> Void

    private struct Peer {
        var requester: Requester
        /// When it was accepted or last answered (monotonic nanoseconds).
        var lastFrame: UInt64
    }

    private let listenFD: CInt
    private let poll: CInt
    private let wake: CInt
    private let router: RequestRouter
    private let logger: Logger
    private let handOff: HandOff
    private let onStop: @Sendable () -> Void
    private var peers: [CInt: Peer] = [:]
    /// One line of up to `Wire.maxLineBytes`, its `\r\n`, and one byte more to
    /// tell a longer read apart.
    private var buffer = [UInt8](repeating: 0, count: Wire.maxLineBytes + 3)
    private var lastSweep: UInt64 = 0

    /// Takes over `listenFD` (closed when the lane stops). `handOff` adopts a
    /// connection into the NIO server; `onStop` runs on the lane's thread last.
    init(listenFD: CInt, router: RequestRouter, logger: Logger, handOff: @escaping HandOff,
         onStop: @escaping @Sendable () -> Void) throws(ServerStartError) {
        let poll = sv_poll_create()
        let wake = sv_wake_create()
        guard poll >= 0, wake >= 0, sv_poll_add(poll, listenFD) == 0, sv_poll_add(poll, wake) == 0 else {
            let reason = "poll set: errno \(errno)"
            if poll >= 0 { close(poll) }
            if wake >= 0 { close(wake) }
            throw .bind(reason)
        }
        self.listenFD = listenFD
        self.poll = poll
        self.wake = wake
        self.router = router
        self.logger = logger
        self.handOff = handOff
        self.onStop = onStop
    }

    /// Starts the lane's thread; it runs until `stop`.
    func start() throws(ServerStartError) {
        var thread = pthread_t()
        let box = Unmanaged.passRetained(self).toOpaque()
        let rc = pthread_create(&thread, nil, { box in
            guard let box else { return nil }
            let lane = Unmanaged<ReleaseLane>.fromOpaque(box).takeRetainedValue()
            sv_name_thread("vaultd-lane")
            lane.run()
            return nil
        }, box)
        guard rc == 0 else {
            Unmanaged<ReleaseLane>.fromOpaque(box).release()
            throw .bind("thread: error \(rc)")
        }
        pthread_detach(thread)
    }

    /// Stops accepting and closes the lane's connections (from any thread).
    func stop() {
        var one: UInt64 = 1
        _ = write(wake, &one, MemoryLayout<UInt64>.size)
    }

    private func run() {
        var ready = [CInt](repeating: 0, count: 64)
        let idleTimeout = UInt64(router.limits.idleTimeout) * 1_000_000_000
        loop: while true {
            // Wake once a second while connections could go idle.
            let timeout: CInt = peers.isEmpty || idleTimeout == 0 ? -1 : 1000
            let n = sv_poll_wait(poll, &ready, CInt(ready.count), timeout)
            if n < 0 {
                if errno == EINTR { continue }
                logger.error("the release lane's poll failed", metadata: ["errno": "\(errno)"])
                break
            }
            for fd in ready.prefix(Int(n)) {
                switch fd {
                case wake: break loop
                case listenFD: accept()
                default: serve(fd)
                }
            }
            if idleTimeout > 0 { closeIdle(after: idleTimeout) }
        }
        for fd in Array(peers.keys) { drop(fd) }
        close(listenFD)
        close(wake)
        close(poll)
        onStop()
    }

    private func accept() {
        let fd = sv_accept(listenFD)
        guard fd >= 0 else {
            // Out of descriptors: the listener stays readable, so pause rather than spin.
            if errno == EMFILE || errno == ENFILE { usleep(10_000) }
            return
        }
        var pid: CInt = 0
        var uid: CUnsignedInt = 0
        let peer = sv_peer_credentials(fd, &pid, &uid) == 0 ? Requester(pid: pid, uid: uid) : nil
        guard let peer, peer.uid == router.ownUID, router.connections.addToLane(limit: router.limits.maxConnections) else {
            // Another uid or an unreadable one (`forbidden`), or one too many
            // (`rate_limited`): the NIO side answers and closes.
            handOff(fd, ConnectionHandler.HandOver(peer: peer))
            return
        }
        peers[fd] = Peer(requester: peer, lastFrame: NIODeadline.now().uptimeNanoseconds)
        guard sv_poll_add(poll, fd) == 0 else {
            drop(fd)
            return
        }
        // A client writes its request right after connecting: it is usually here already.
        serve(fd)
    }

    /// Reads what `fd` sent: answers one releasable `session` line, closes on
    /// end of input, hands anything else over.
    private func serve(_ fd: CInt) {
        guard let peer = peers[fd] else { return }
        let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        if count < 0 {
            if errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { return }
            drop(fd)   // reset by the peer
            return
        }
        guard count > 0 else {
            drop(fd)   // the client is done
            return
        }
        // A request handed over may carry a secret (`import`'s tokens): the
        // lane's buffer lives as long as vaultd, so it keeps no request.
        defer { buffer.withUnsafeMutableBytes { sv_wipe($0.baseAddress, UInt(count)) } }
        let read = buffer[..<count]
        guard let answer = answer(read, requester: peer.requester) else {
            give(fd, input: Array(read))
            return
        }
        let sent = answer.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT | MSG_NOSIGNAL)) }
        if sent == answer.count {
            peers[fd]?.lastFrame = NIODeadline.now().uptimeNanoseconds
        } else if sent < 0 && errno != EAGAIN && errno != EWOULDBLOCK {
            drop(fd)   // gone before its answer
        } else {
            // The client is not reading: NIO writes the rest when it can.
            give(fd, output: Array(answer[max(sent, 0)...]))
        }
    }

    /// The answer line for `read` if it is one whole releasable `session`
    /// request; nil for anything the NIO side must see.
    private func answer(_ read: ArraySlice<UInt8>, requester: Requester) -> [UInt8]? {
        // One newline, at the end; the line within the limit (LineSplitter's rules).
        guard read.last == 0x0A, read.count - 1 <= Wire.maxLineBytes else { return nil }
        var line = read.dropLast()
        guard !line.contains(0x0A) else { return nil }
        if line.last == 0x0D { line = line.dropLast() }
        guard let request = try? Request.decode(line: line), let (account, minValid) = RequestRouter.fastSession(request),
              let released = router.vault.releaseIfFresh(account: account, minValid: minValid) else { return nil }
        router.auditRelease(released, requester: requester)
        return released.answer(id: request.id)
    }

    private func closeIdle(after timeout: UInt64) {
        let now = NIODeadline.now().uptimeNanoseconds
        guard now - lastSweep >= 1_000_000_000 else { return }
        lastSweep = now
        for (fd, peer) in peers where now - peer.lastFrame >= timeout { drop(fd) }
    }

    /// Leaves the lane: closed, or given to the NIO server.
    private func forget(_ fd: CInt) {
        guard peers.removeValue(forKey: fd) != nil else { return }
        _ = sv_poll_remove(poll, fd)
        router.connections.removeFromLane()
    }

    private func drop(_ fd: CInt) {
        forget(fd)
        close(fd)
    }

    private func give(_ fd: CInt, input: [UInt8] = [], output: [UInt8] = []) {
        let peer = peers[fd]?.requester
        forget(fd)
        handOff(fd, ConnectionHandler.HandOver(peer: peer, input: input, output: output))
    }
}
