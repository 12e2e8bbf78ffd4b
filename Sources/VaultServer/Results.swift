import VaultCore
import VaultProtocol

// The wire shapes of the broker's values: what `Operations.route` puts in a
// result object (docs/protocol.md). The broker returns values; only the
// server decides how they look on the socket.

extension FactorStatus {
    func json(_ language: Language) -> JSON {
        var o: [String: JSON] = ["factor": .string(factor.rawValue), "state": .string(state.rawValue),
                                 "label": .string(label.text(language))]
        if let retryAfter { o["retry_after"] = .int(Int64(retryAfter)) }
        return .object(o)
    }
}

extension ReleasedSession {
    /// A released session as an app receives it: never the refresh token.
    var json: JSON {
        var claims = meta.claims
        if claims["name"] == nil { claims["name"] = .string(meta.name) }
        var o: [String: JSON] = [
            "access_token": .string(accessToken), "token_type": "Bearer",
            "account": .string(meta.account), "provider": .string(meta.provider), "claims": .object(claims),
        ]
        o["expires_at"] = expiresAt.map { .int($0) } ?? .null
        return .object(o)
    }
}
