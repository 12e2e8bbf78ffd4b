import NIOHTTP1
import OIDCToken
import VaultFactor

/// Discovery document and JWKS of one provider, cached for
/// `profile.metadataCacheSeconds`. The JWKS is refetched on demand when a token
/// names a key we do not know (at most once per verification).
actor ProviderCache: KeySource {
    nonisolated let profile: ProviderProfile
    nonisolated let http: OIDCHTTPClient
    nonisolated let policy: TransportPolicy
    nonisolated let now: @Sendable () -> Int64

    private var metadataEntry: (value: ProviderMetadata, fetchedAt: Int64)?
    private var keysEntry: (value: KeySet, fetchedAt: Int64)?
    /// How many times the JWKS was fetched (for tests and diagnostics).
    private(set) var jwksFetches = 0

    struct MetadataFailure: Error, Equatable {
        var transport: OIDCHTTPClient.Failure?
        var reason: String
    }

    init(profile: ProviderProfile, http: OIDCHTTPClient, now: @escaping @Sendable () -> Int64) {
        self.profile = profile
        self.http = http
        self.policy = TransportPolicy(issuer: profile.issuer)
        self.now = now
    }

    func metadata() async throws(MetadataFailure) -> ProviderMetadata {
        if let entry = metadataEntry, now() - entry.fetchedAt < profile.metadataCacheSeconds {
            return entry.value
        }
        guard policy.allows(profile.issuer), policy.allows(profile.discoveryURL) else {
            throw MetadataFailure(transport: .forbiddenURL, reason: "issuer or discovery URL not https")
        }
        let response: OIDCHTTPClient.Response
        do {
            response = try await http.send(.GET, profile.discoveryURL, headers: [("accept", "application/json")],
                                           timeout: profile.requestTimeout, maxBytes: profile.maxResponseBytes)
        } catch {
            throw MetadataFailure(transport: error, reason: "discovery: \(error)")
        }
        guard response.status == 200 else {
            throw MetadataFailure(transport: nil, reason: "discovery: HTTP \(response.status)")
        }
        let metadata: ProviderMetadata
        do {
            metadata = try ProviderMetadata.parse(response.body, expectedIssuer: profile.issuer, policy: policy)
        } catch {
            throw MetadataFailure(transport: nil, reason: "discovery: \(error)")
        }
        guard !allowedAlgorithms(metadata).isEmpty else {
            throw MetadataFailure(transport: nil, reason: "discovery: no supported signing algorithm")
        }
        metadataEntry = (metadata, now())
        return metadata
    }

    /// The profile's algorithms, or for a generic profile what discovery
    /// advertises ∩ {RS256, ES256, EdDSA} (RS256 when discovery says nothing).
    nonisolated func allowedAlgorithms(_ metadata: ProviderMetadata) -> Set<SigningAlgorithm> {
        if let configured = profile.allowedAlgorithms { return configured }
        if metadata.signingAlgorithms.isEmpty { return [.rs256] }
        return Set(metadata.signingAlgorithms.compactMap(SigningAlgorithm.init(rawValue:)))
    }

    func keys(refresh: Bool) async throws(KeySourceFailure) -> KeySet {
        if !refresh, let entry = keysEntry, now() - entry.fetchedAt < profile.metadataCacheSeconds {
            return entry.value
        }
        let metadata: ProviderMetadata
        do { metadata = try await self.metadata() } catch {
            throw KeySourceFailure(transport: error.transport, reason: error.reason)
        }
        let response: OIDCHTTPClient.Response
        do {
            jwksFetches += 1
            response = try await http.send(.GET, metadata.jwksURI, headers: [("accept", "application/json")],
                                           timeout: profile.requestTimeout, maxBytes: profile.maxResponseBytes)
        } catch {
            throw KeySourceFailure(transport: error, reason: "jwks: \(error)")
        }
        guard response.status == 200 else {
            throw KeySourceFailure(transport: nil, reason: "jwks: HTTP \(response.status)")
        }
        let set: KeySet
        do {
            set = try KeySet.parse(response.body, allowed: allowedAlgorithms(metadata))
        } catch {
            throw KeySourceFailure(transport: nil, reason: "jwks: \(error)")
        }
        keysEntry = (set, now())
        return set
    }

    /// Forgets cached metadata and keys (e.g. after a provider-side change).
    func invalidate() {
        metadataEntry = nil
        keysEntry = nil
    }
}
