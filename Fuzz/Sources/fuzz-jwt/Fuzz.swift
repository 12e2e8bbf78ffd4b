import Dispatch
import FuzzReplay
import JWTKit
import OIDCToken
import Synchronization
import VaultProtocol

// libFuzzer supplies `main` when scripts/fuzz builds this (-D FUZZING).
#if !FUZZING
@main enum Replay { static func main() { FuzzReplay.main(fuzz) } }
#endif

/// The ID-token path of the OIDC factor: `IDTokenCheck` runs the same JWKS
/// parsing and `IDTokenVerifier` steps (header, kid/alg selection, signature,
/// claims) that a login does. The first input byte picks the mode (seeds:
/// Fuzz/corpus/jwt, made by Fuzz/gen-jwt-corpus.py):
///
///   `J<jwks>\0<token>`     the JWKS document as well as the token: key parsing,
///                          inference of `alg`, refusal of odd keys, selection.
///   `S<header>\0<payload>` header and payload JSON, signed here with the fixed
///                          private keys, so mutations get past the signature
///                          and reach the claim checks through the real path.
///   `T<token>` (any other) a compact token against the fixed JWKS: splitting,
///                          base64url, header checks, signature refusal.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    let rest = input.dropFirst()
    switch input[0] {
    case UInt8(ascii: "J"):
        let (jwks, token) = split(rest)
        if let keys = try? IDTokenCheck.Keys.parse(Array(jwks), allowed: Set(SigningAlgorithm.allCases)) {
            check(String(decoding: token, as: UTF8.self), keys: keys)
        }
    case UInt8(ascii: "S"):
        let (header, payload) = split(rest)
        check(fixture.signed(header: Array(header), payload: Array(payload)), keys: fixture.keys)
    default:
        check(String(decoding: rest, as: UTF8.self), keys: fixture.keys)
    }
    return 0
}

/// Verifies, and when the verifier accepts, checks what acceptance promises.
private func check(_ token: String, keys: IDTokenCheck.Keys) {
    guard let claims = try? fixture.check.verify(token, keys: keys, nonce: Fixture.nonce,
                                                        accessToken: Fixture.accessToken, now: Fixture.now)
    else { return }
    precondition(claims["iss"]?.stringValue == Fixture.issuer, "accepted a token from another issuer")
    precondition(!(claims["sub"]?.stringValue ?? "").isEmpty, "accepted a token without a subject")
    precondition(claims["nonce"]?.stringValue == Fixture.nonce, "accepted a token with another nonce")
    let audiences = claims["aud"]?.arrayValue?.compactMap(\.stringValue) ?? [claims["aud"]?.stringValue].compactMap { $0 }
    precondition(audiences.contains(Fixture.clientID), "accepted a token not meant for us")
}

/// Splits at the first NUL: (before, after). No NUL: everything is the first part.
private func split(_ bytes: ArraySlice<UInt8>) -> (ArraySlice<UInt8>, ArraySlice<UInt8>) {
    guard let nul = bytes.firstIndex(of: 0) else { return (bytes, []) }
    return (bytes[..<nul], bytes[(nul + 1)...])
}

/// The fixture's signers come from jwt-kit (an independent implementation that
/// makes the tokens), whose key collection is an actor: made once, waited for.
/// Every input is checked synchronously: a task per input is slow under load
/// and makes libFuzzer's leak check scan the heap after every input (scripts/fuzz).
private func blockingValue<T: Sendable>(_ body: @escaping @Sendable () async -> T) -> T? {
    let box = Box<T>()
    let done = DispatchSemaphore(value: 0)
    Task {
        let value = await body()
        box.value.withLock { $0 = value }
        done.signal()
    }
    done.wait()
    return box.value.withLock { $0 }
}

private final class Box<T: Sendable>: Sendable {
    let value: Mutex<T?> = Mutex(nil)
}

/// The verifier settings, the parsed fixed JWKS and a signer per kid, made once.
private let fixture: Harness = {
    guard let harness = blockingValue({ await Harness.make() }) else { fatalError("fuzz-jwt: no fixture") }
    return harness
}()

private struct Harness: Sendable {
    let check: IDTokenCheck
    let keys: IDTokenCheck.Keys
    /// (kid, alg, signer) for every key in the fixed JWKS.
    let signers: [(kid: String, alg: String, signer: any JWTAlgorithm)]

    static func make() async -> Harness {
        let check = IDTokenCheck(issuer: Fixture.issuer, clientID: Fixture.clientID,
                                 trustedAudiences: [Fixture.trustedAudience],
                                 allowedAlgorithms: Set(SigningAlgorithm.allCases), clockSkew: Fixture.clockSkew)
        do {
            let keys = try IDTokenCheck.Keys.parse(Array(Fixture.jwks.utf8), allowed: Set(SigningAlgorithm.allCases))
            guard keys.usable == 4 else { fatalError("fuzz-jwt: the fixed JWKS should give 4 keys, not \(keys.usable)") }
            let collection = JWTKeyCollection()
            await collection.add(ecdsa: try ES256PrivateKey(pem: Fixture.es256PEM), kid: "es")
            await collection.add(rsa: try Insecure.RSA.PrivateKey(pem: Fixture.rs256PEM), digestAlgorithm: .sha256, kid: "rs")
            await collection.add(rsa: try Insecure.RSA.PrivateKey(pem: Fixture.rs256NoAlgPEM), digestAlgorithm: .sha256,
                                 kid: "rs-noalg")
            await collection.add(eddsa: try EdDSA.PrivateKey(d: Fixture.ed25519D, curve: .ed25519), kid: "ed")
            var signers: [(kid: String, alg: String, signer: any JWTAlgorithm)] = []
            for (kid, alg) in [("es", "ES256"), ("rs", "RS256"), ("ed", "EdDSA"), ("rs-noalg", "RS256")] {
                signers.append((kid, alg, try await collection.getKey(for: JWKIdentifier(string: kid))))
            }
            return Harness(check: check, keys: keys, signers: signers)
        } catch {
            fatalError("fuzz-jwt: fixture keys: \(error)")
        }
    }

    /// A compact JWS over exactly these bytes, signed by the key the header's kid
    /// names, else by the first key of the header's alg, else left with a junk
    /// signature (so `alg: none`, HS256 and the like still reach the verifier).
    func signed(header: [UInt8], payload: [UInt8]) -> String {
        let input = Base64URL.encode(header) + "." + Base64URL.encode(payload)
        var signature: [UInt8] = [0]
        if case .object(let h)? = try? JSON.parse(header) {
            let kid = h["kid"]?.stringValue
            let alg = h["alg"]?.stringValue
            let key = signers.first { $0.kid == kid } ?? signers.first { $0.alg == alg }
            if let key, let s = try? key.signer.sign(Array(input.utf8)) { signature = s }
        }
        return input + "." + Base64URL.encode(signature)
    }
}
