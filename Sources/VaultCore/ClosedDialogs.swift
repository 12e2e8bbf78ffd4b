/// The unlock and login dialogs the person closed, per sandboxed app that
/// raised them: an app that puts one in front of them again the moment they
/// close it (prompt fatigue: asking until a tired person types the PIN,
/// touches the reader or logs in with BankID to make it stop) is held back.
/// A plain value the `Vault` actor keeps and applies before it opens either
/// dialog (`admitDialog`, Unlocking.swift); docs/threat-model.md.
///
/// One close costs an app nothing, so a slip followed by the person's own
/// retry in the app still shows the dialog. After `closesAllowed` closes
/// within `window`, the app raises neither dialog until `quiet` has passed
/// since the last close; it hears `rate_limited` with the wait. Unlock and
/// login count together: switching between them gains an app nothing. Only
/// confined apps (Flatpak, Snap, unidentified) are held back: the person's
/// own tools (the settings app, vaultctl) run unconfined and always get the dialog.
struct ClosedDialogs {
    static let closesAllowed = 2
    static let window: Double = 60
    /// As long as an app is not asked again about a grant after Deny
    /// (`GrantCheck.askAgainAfter`): the same wear-down, the same pause.
    static let quiet: Double = GrantCheck.askAgainAfter
    /// An app per process id (unidentified peers share one key) must not
    /// grow this without end.
    static let keysKept = 256

    /// Recent closes per app, oldest first, at most `closesAllowed`.
    private var closes: [String: [Double]] = [:]

    /// Seconds `app` must wait before it may raise the unlock dialog again,
    /// or nil: it may.
    func wait(_ app: String, now: Double) -> Int? {
        guard let recent = closes[app], recent.count >= Self.closesAllowed,
              let first = recent.first, let last = recent.last,
              last - first < Self.window, now - last < Self.quiet else { return nil }
        return max(1, Int((last + Self.quiet - now).rounded(.up)))
    }

    /// The person closed (cancelled) an unlock dialog `app` raised.
    mutating func closed(_ app: String, now: Double) {
        var recent = (closes[app] ?? []).filter { now - $0 < Self.window }
        recent.append(now)
        closes[app] = Array(recent.suffix(Self.closesAllowed))
        if closes.count > Self.keysKept {
            closes = closes.filter { _, times in times.last.map { now - $0 < Self.quiet } ?? false }
        }
    }

    var keyCount: Int { closes.count }
}
