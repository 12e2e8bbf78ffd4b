/// A factor's last probe answer, reused for `lifetime`, so that a client
/// polling `status` or `factors` (or an app asking in a loop) reaches what is
/// behind the factor at most once per interval: an external plugin's process,
/// fprintd and the polkit check behind it. Probes asked for while one runs
/// wait for its answer instead of starting another.
public actor ProbeCache {
    private let lifetime: Duration
    private var last: (presence: FactorPresence, at: ContinuousClock.Instant)?
    private var running: Task<FactorPresence, Never>?

    /// `seed`: an answer just obtained (the probe that loaded the plugin).
    public init(lifetime: Duration, seed: FactorPresence? = nil) {
        self.lifetime = lifetime
        last = seed.map { ($0, ContinuousClock.now) }
    }

    public func presence(_ probe: @escaping @Sendable () async -> FactorPresence) async -> FactorPresence {
        if let last, ContinuousClock.now - last.at < lifetime { return last.presence }
        if let running { return await running.value }
        // Not cancelled with the caller: others may be waiting for it, and the
        // plugin run is bounded by the probe timeout anyway.
        let run = Task { await probe() }
        running = run
        let presence = await run.value
        last = (presence, ContinuousClock.now)
        running = nil
        return presence
    }
}
