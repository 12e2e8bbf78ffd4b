import Foundation
import VaultFactor
import VaultProtocol
import VaultStore

/// Keeping sessions fresh: silent refresh before the access token expires,
/// single-flight per session, and the rotated refresh token stored durably
/// before anyone sees the new access token.
extension Vault {
    /// `minValid` widens the refresh window for this call. A token whose expiry
    /// is unknown counts as fresh (there is nothing to compare), and the token a
    /// refresh brings is returned even if the provider gave it a shorter life
    /// than `minValid`: refreshing again could not make it longer.
    func freshSession(id: String, entry: SessionTable.Entry, key: SecureBytes, minValid: Int64 = 0) async throws(VaultFailure) -> ReleasedSession {
        // A refresh already running for this session answers this request too,
        // before any decryption: 100 apps waking at once wait, not queue on the actor.
        if let running = refreshing[id] { return try await running.value.get() }
        let nowS = Int64(now())
        let secret = try openSecret(id: id, entry: entry, key: key)
        let meta = entry.meta
        let expiresIn = meta.accessExpiresAt.map { $0 - nowS }
        let window = max(Vault.refreshWindow, minValid)
        if let token = secret.accessToken, expiresIn.map({ $0 > window }) ?? true {
            return ReleasedSession(accessToken: token, expiresAt: meta.accessExpiresAt, meta: meta)
        }
        let stillValid = secret.accessToken != nil && (expiresIn ?? 0) > 5
        guard let refreshToken = secret.refreshToken, let provider = providers.provider(for: meta) else {
            if stillValid, let token = secret.accessToken {
                return ReleasedSession(accessToken: token, expiresAt: meta.accessExpiresAt, meta: meta)
            }
            // No way to renew (Vipps issues no refresh tokens): the session has ended.
            forget(id: id, reason: "expired")
            throw VaultFailure(.sessionExpired)
        }
        // Detached, so the token call starts now: a task made here would run on
        // the actor, behind every request that queued there meanwhile (100
        // apps waking at once put 99 ahead of it).
        let task = Task.detached(priority: .high) {
            await self.performRefresh(id: id, provider: provider, refreshToken: refreshToken, secret: secret, key: key)
        }
        refreshing[id] = task
        table.beginRefresh(id)
        let result = await task.value
        refreshing[id] = nil
        for waiter in table.finishRefresh(id) { waiter(result) }
        return try result.get()
    }

    /// The refresh that a fast-path request claimed (`releaseIfReady`); its
    /// outcome goes to everyone who joined. A refresh may already be running
    /// from the full path, or the token turn out fresh by now: either way the
    /// joiners get what `freshSession` says.
    func refreshForWaiters(id: String, minValid: Int64) async {
        let result: Result<ReleasedSession, VaultFailure>
        if let key = vaultKey {
            if let entry = table.entry(id) {
                do throws(VaultFailure) {
                    result = .success(try await freshSession(id: id, entry: entry, key: key, minValid: minValid))
                } catch {
                    result = .failure(error)
                }
            } else {
                result = .failure(VaultFailure(.noSession))
            }
        } else {
            result = .failure(lockedFailure())
        }
        for waiter in table.finishRefresh(id) { waiter(result) }
    }

    /// The token call off the actor, then its outcome settled on it.
    nonisolated func performRefresh(id: String, provider: any IdentityProvider, refreshToken: String, secret: SessionSecret,
                                    key: SecureBytes) async -> Result<ReleasedSession, VaultFailure> {
        let outcome: Result<TokenGrant, VaultFailure>
        do {
            outcome = .success(try await provider.refresh(refreshToken: refreshToken))
        } catch {
            outcome = .failure(error)
        }
        return await settleRefresh(id: id, provider: provider, refreshToken: refreshToken, secret: secret, key: key,
                                   outcome: outcome)
    }

    func settleRefresh(id: String, provider: any IdentityProvider, refreshToken: String, secret: SessionSecret,
                       key: SecureBytes, outcome: Result<TokenGrant, VaultFailure>) -> Result<ReleasedSession, VaultFailure> {
        let grant: TokenGrant
        switch outcome {
        case .success(let g):
            grant = g
        case .failure(let error):
            audit.record("refresh", factor: provider.id, outcome: error.code.rawValue)
            guard let entry = table.entry(id) else { return .failure(VaultFailure(.noSession)) }
            if error.code == .sessionExpired {
                forget(id: id, reason: "refresh_rejected")
                return .failure(error)
            }
            // The provider is down or slow: an access token that still works is served.
            if let token = secret.accessToken, let exp = entry.meta.accessExpiresAt, exp > Int64(now()) + 5 {
                return .success(ReleasedSession(accessToken: token, expiresAt: exp, meta: entry.meta))
            }
            return .failure(error)
        }
        guard var meta = table.entry(id)?.meta else { return .failure(VaultFailure(.noSession)) }
        let newRefresh = grant.refreshToken ?? refreshToken
        let renewed = SessionSecret(accessToken: grant.accessToken, refreshToken: newRefresh, idToken: grant.idToken ?? secret.idToken)
        meta.accessExpiresAt = grant.accessExpiresAt
        if let r = grant.refreshExpiresAt { meta.refreshExpiresAt = r }
        do {
            // Durable first: if vaultd dies after this line the new refresh token
            // is what the store holds, which is what a rotating provider accepts.
            // The audit entry rides in the same commit: every waiting app is
            // held until it returns, and a second fsync doubled that wait.
            try persist(id: id, meta: meta, secret: renewed, tokenForHash: newRefresh,
                        auditing: audit.entry("refresh", factor: provider.id, outcome: "ok",
                                              detail: ["rotated": .bool(grant.refreshToken != nil && grant.refreshToken != refreshToken)]))
        } catch {
            return .failure(error)
        }
        var released = ReleasedSession(accessToken: grant.accessToken, expiresAt: grant.accessExpiresAt, meta: meta)
        released.resultTail = ReleasedSession.tail(of: meta)   // once, for every waiter's answer
        return .success(released)
    }

    /// Removes a session whose tokens can no longer be used.
    func forget(id: String, reason: String) {
        let account = table.entry(id)?.meta.account
        _ = try? store.deleteSession(id: id)
        table.remove(id)
        audit.record("session_ended", outcome: reason, detail: ["account": .string(account ?? "")])
    }
}
