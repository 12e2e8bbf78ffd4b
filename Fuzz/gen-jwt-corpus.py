"""Makes the fuzz-jwt fixture: fresh test keys, the Swift file the fuzzer reads
them from, and the seed corpus in Fuzz/corpus/jwt. Run from the repository root
with the provider venv (it has PyJWT and cryptography):

    "$(scripts/provider-venv)" Fuzz/gen-jwt-corpus.py

Both outputs are committed and must come from the same run (the seed tokens are
signed with the keys written into TestKeys.swift). The keys are throwaway test
keys; nothing else trusts them.

Seed files start with one byte naming the fuzzer's mode (see fuzz-jwt/Fuzz.swift):
  T<token>                 a compact JWS against the fixed JWKS
  J<jwks>\\0<token>         a compact JWS against the given JWKS document
  S<header>\\0<payload>     header and payload JSON that the fuzzer signs itself
Inputs the fuzzer found are kept beside them as regression-* and replayed by
Tests/OIDCFactorTests/FuzzRegressionTests.swift; this script leaves them alone.
"""
import base64
import hashlib
import hmac
import json
import os
import pathlib
import warnings

import jwt  # PyJWT: the valid seeds come from a real, independent JWS library
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

# The 1024-bit RSA seed is deliberate (the verifier must refuse it); PyJWT warns about it.
warnings.simplefilter("ignore")

ROOT = pathlib.Path(__file__).resolve().parent
CORPUS = ROOT / "corpus" / "jwt"
SWIFT = ROOT / "Sources" / "fuzz-jwt" / "TestKeys.swift"

# The verifier's settings in the fuzzer; written into TestKeys.swift too.
ISSUER = "https://issuer.example"
CLIENT = "fuzz-client"
TRUSTED = "trusted-audience"
NONCE = "fuzz-nonce"
ACCESS = "fuzz-access-token"
NOW = 1_700_000_000
SKEW = 60


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def uint(n: int) -> str:
    return b64(n.to_bytes((n.bit_length() + 7) // 8, "big"))


es_key = ec.generate_private_key(ec.SECP256R1())
rs_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
rs_noalg_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
ed_key = ed25519.Ed25519PrivateKey.generate()
other_es_key = ec.generate_private_key(ec.SECP256R1())  # in no fixed JWKS: for the J-mode seeds


def ec_jwk(key, kid, alg="ES256"):
    n = key.public_key().public_numbers()
    out = {"kty": "EC", "crv": "P-256", "x": b64(n.x.to_bytes(32, "big")), "y": b64(n.y.to_bytes(32, "big")),
           "use": "sig", "kid": kid}
    if alg:
        out["alg"] = alg
    return out


def rsa_jwk(key, kid, alg="RS256"):
    n = key.public_key().public_numbers()
    out = {"kty": "RSA", "n": uint(n.n), "e": uint(n.e), "use": "sig", "kid": kid}
    if alg:
        out["alg"] = alg
    return out


def ed_jwk(key, kid):
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return {"kty": "OKP", "crv": "Ed25519", "x": b64(raw), "alg": "EdDSA", "use": "sig", "kid": kid}


# The fixed JWKS: one key per algorithm with `alg`, plus a second RSA key without
# `alg` (inferred RS256), so a kid-less RS256 token is ambiguous and a kid-less
# ES256 one is not.
JWKS = {"keys": [ec_jwk(es_key, "es"), rsa_jwk(rs_key, "rs"), ed_jwk(ed_key, "ed"),
                 rsa_jwk(rs_noalg_key, "rs-noalg", alg=None)]}


def pem(key) -> str:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def sign(alg: str, key, data: bytes) -> bytes:
    if alg == "ES256":
        r, s = decode_dss_signature(key.sign(data, ec.ECDSA(hashes.SHA256())))
        return r.to_bytes(32, "big") + s.to_bytes(32, "big")
    if alg == "RS256":
        return key.sign(data, padding.PKCS1v15(), hashes.SHA256())
    if alg == "EdDSA":
        return key.sign(data)
    raise ValueError(alg)


def compact(header: bytes, payload: bytes, signature: bytes) -> str:
    return f"{b64(header)}.{b64(payload)}.{b64(signature)}"


def signed_raw(header: bytes, payload: bytes, alg: str, key) -> str:
    """A JWS over exact header/payload bytes (duplicate keys, odd numbers, nesting)."""
    signing_input = f"{b64(header)}.{b64(payload)}".encode()
    return f"{signing_input.decode()}.{b64(sign(alg, key, signing_input))}"


def at_hash(alg: str) -> str:
    digest = (hashlib.sha512 if alg == "EdDSA" else hashlib.sha256)(ACCESS.encode()).digest()
    return b64(digest[: len(digest) // 2])


def claims(alg="ES256", **over):
    c = {"iss": ISSUER, "sub": "person-1", "aud": CLIENT, "exp": NOW + 300, "iat": NOW, "nonce": NONCE,
         "at_hash": at_hash(alg)}
    for k, v in over.items():
        if v is None:
            c.pop(k, None)
        else:
            c[k] = v
    return c


def pyjwt(alg, key, kid, payload):
    headers = {"kid": kid} if kid is not None else {}
    return jwt.encode(payload, key, algorithm=alg, headers=headers)


def dumps(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


seeds: dict[str, bytes] = {}


def T(name, token):
    seeds[f"t-{name}"] = b"T" + token.encode()


def J(name, jwks, token):
    body = jwks if isinstance(jwks, bytes) else dumps(jwks)
    seeds[f"j-{name}"] = b"J" + body + b"\0" + token.encode()


def S(name, header, payload):
    h = header if isinstance(header, bytes) else dumps(header)
    p = payload if isinstance(payload, bytes) else dumps(payload)
    seeds[f"s-{name}"] = b"S" + h + b"\0" + p


# --- T: tokens against the fixed JWKS ---------------------------------------
T("valid-es256", pyjwt("ES256", es_key, "es", claims("ES256")))
T("valid-rs256", pyjwt("RS256", rs_key, "rs", claims("RS256")))
T("valid-eddsa", pyjwt("EdDSA", ed_key, "ed", claims("EdDSA")))
T("valid-rs256-inferred-alg", pyjwt("RS256", rs_noalg_key, "rs-noalg", claims("RS256")))
T("no-kid-es256", pyjwt("ES256", es_key, None, claims("ES256")))
T("no-kid-rs256-ambiguous", pyjwt("RS256", rs_key, None, claims("RS256")))
T("bad-kid", pyjwt("ES256", es_key, "nobody", claims("ES256")))
T("kid-of-another-alg", pyjwt("ES256", es_key, "rs", claims("ES256")))
T("kid-not-a-string", signed_raw(b'{"alg":"ES256","kid":7}', dumps(claims()), "ES256", es_key))
T("alg-none-empty-signature", compact(b'{"alg":"none"}', dumps(claims()), b""))
T("alg-none-with-signature", compact(b'{"alg":"none","kid":"rs"}', dumps(claims()), b"\0"))
T("alg-none-rs256-signed", signed_raw(b'{"alg":"none","kid":"rs"}', dumps(claims("RS256")), "RS256", rs_key))
rs_public_pem = rs_key.public_key().public_bytes(serialization.Encoding.PEM,
                                                 serialization.PublicFormat.SubjectPublicKeyInfo)
hs_header = b'{"alg":"HS256","kid":"rs"}'
hs_input = f"{b64(hs_header)}.{b64(dumps(claims()))}".encode()
T("hs256-keyed-with-rsa-public-key",
  f"{hs_input.decode()}.{b64(hmac.new(rs_public_pem, hs_input, hashlib.sha256).digest())}")
T("crit-header", signed_raw(b'{"alg":"ES256","kid":"es","crit":["exp"]}', dumps(claims()), "ES256", es_key))
T("duplicate-iss", signed_raw(b'{"alg":"ES256","kid":"es"}',
                              dumps(claims())[:-1] + b',"iss":"https://evil.example"}', "ES256", es_key))
T("huge-exp-integer", signed_raw(b'{"alg":"ES256","kid":"es"}',
                                 dumps(claims(exp=None))[:-1] + b',"exp":99999999999999999999999}', "ES256", es_key))
T("huge-exp-double", signed_raw(b'{"alg":"ES256","kid":"es"}',
                                dumps(claims(exp=None))[:-1] + b',"exp":1e308}', "ES256", es_key))
T("exp-int64-max", signed_raw(b'{"alg":"ES256","kid":"es"}',
                              dumps(claims(exp=None))[:-1] + b',"exp":9223372036854775000}', "ES256", es_key))
T("iat-int64-min", signed_raw(b'{"alg":"ES256","kid":"es"}',
                              dumps(claims(iat=None))[:-1] + b',"iat":-9223372036854775808}', "ES256", es_key))
T("float-exp", pyjwt("ES256", es_key, "es", claims(exp=NOW + 300.5)))
nested = b"[" * 31 + b"1" + b"]" * 31
T("nested-claim-31", signed_raw(b'{"alg":"ES256","kid":"es"}',
                                dumps(claims())[:-1] + b',"deep":' + nested + b"}", "ES256", es_key))
too_deep = b"[" * 40 + b"]" * 40
T("nested-claim-too-deep", signed_raw(b'{"alg":"ES256","kid":"es"}',
                                      dumps(claims())[:-1] + b',"deep":' + too_deep + b"}", "ES256", es_key))
T("expired", pyjwt("ES256", es_key, "es", claims(exp=NOW - 120)))
T("future-iat", pyjwt("ES256", es_key, "es", claims(iat=NOW + 3600)))
T("future-nbf", pyjwt("ES256", es_key, "es", claims(nbf=NOW + 3600)))
T("wrong-nonce", pyjwt("ES256", es_key, "es", claims(nonce="other")))
T("at-hash-mismatch", pyjwt("ES256", es_key, "es", claims(at_hash="AAAA")))
T("aud-extra-untrusted", pyjwt("ES256", es_key, "es", claims(aud=[CLIENT, "stranger"], azp=CLIENT)))
T("aud-trusted-with-azp", pyjwt("ES256", es_key, "es", claims(aud=[CLIENT, TRUSTED], azp=CLIENT)))
T("aud-empty-array", pyjwt("ES256", es_key, "es", claims(aud=[])))
T("aud-mixed-types", pyjwt("ES256", es_key, "es", claims(aud=[CLIENT, 1])))
T("sub-empty", pyjwt("ES256", es_key, "es", claims(sub="")))
T("unicode-claims", pyjwt("ES256", es_key, "es", claims(sub="p\u00e9rson-\U0001F511", name="\u0000\u202e")))
valid = pyjwt("ES256", es_key, "es", claims())
T("truncated-signature", valid[:-10])
T("four-parts", valid + ".e30")
T("padded-parts", valid.replace(".", "=.", 1))
T("whitespace", " " + valid + "\n")
T("signature-of-another-key", signed_raw(b'{"alg":"ES256","kid":"es"}', dumps(claims()), "ES256", other_es_key))

# --- J: a JWKS document and a token -----------------------------------------
other = ec_jwk(other_es_key, "k1")
other_token = pyjwt("ES256", other_es_key, "k1", claims())
J("valid-es256", {"keys": [other]}, other_token)
J("ec-without-alg", {"keys": [ec_jwk(other_es_key, "k1", alg=None)]}, other_token)
J("rsa-without-alg", {"keys": [rsa_jwk(rs_key, "rs", alg=None)]}, pyjwt("RS256", rs_key, "rs", claims("RS256")))
J("eddsa", {"keys": [ed_jwk(ed_key, "ed")]}, pyjwt("EdDSA", ed_key, "ed", claims("EdDSA")))
J("no-kid-anywhere", {"keys": [{k: v for k, v in other.items() if k != "kid"}]},
  pyjwt("ES256", other_es_key, None, claims()))
J("private-key-published", {"keys": [dict(other, d=b64(other_es_key.private_numbers().private_value
                                                      .to_bytes(32, "big")))]}, other_token)
J("duplicate-kid", {"keys": [other, other]}, other_token)
J("same-kid-two-algs", {"keys": [other, rsa_jwk(rs_key, "k1")]}, other_token)
J("kid-not-a-string", {"keys": [dict(other, kid=1)]}, other_token)
J("use-enc", {"keys": [dict(other, use="enc")]}, other_token)
J("key-ops-sign-only", {"keys": [dict(other, key_ops=["sign"])]}, other_token)
J("key-ops-verify", {"keys": [dict(other, key_ops=["verify"])]}, other_token)
J("alg-kty-mismatch", {"keys": [dict(other, alg="RS256")]}, other_token)
J("alg-hs256", {"keys": [dict(other, alg="HS256")]}, other_token)
J("curve-p384", {"keys": [dict(other, crv="P-384")]}, other_token)
J("point-not-on-curve", {"keys": [dict(other, y=other["x"])]}, other_token)
J("short-coordinates", {"keys": [dict(other, x="AQ", y="AQ")]}, other_token)
small = rsa.generate_private_key(public_exponent=65537, key_size=1024)
J("rsa-1024", {"keys": [rsa_jwk(small, "small")]}, pyjwt("RS256", small, "small", claims("RS256")))
J("rsa-exponent-1", {"keys": [dict(rsa_jwk(rs_key, "rs"), e="AQ")]}, pyjwt("RS256", rs_key, "rs", claims("RS256")))
J("rsa-zero-modulus", {"keys": [dict(rsa_jwk(rs_key, "rs"), n="AA")]}, pyjwt("RS256", rs_key, "rs", claims("RS256")))
J("rsa-huge-exponent", {"keys": [dict(rsa_jwk(rs_key, "rs"), e=b64(b"\xff" * 300))]},
  pyjwt("RS256", rs_key, "rs", claims("RS256")))
J("keys-not-an-array", b'{"keys":{"kty":"EC"}}', other_token)
J("not-json", b"<html>jwks</html>", other_token)
J("empty-keys", {"keys": []}, other_token)
J("numbers-and-nesting", b'{"keys":[{"kty":"EC","crv":"P-256","x":1e999,"y":[[[[]]]],"kid":"k1"}],"n":-0.0e-0}',
  other_token)

# --- S: header and payload the fuzzer signs with the fixed keys --------------
for alg, kid in (("ES256", "es"), ("RS256", "rs"), ("EdDSA", "ed"), ("RS256", "rs-noalg")):
    S(f"valid-{kid}", {"alg": alg, "kid": kid, "typ": "JWT"}, claims(alg))
S("no-kid-es256", {"alg": "ES256"}, claims())
S("aud-trusted-azp", {"alg": "ES256", "kid": "es"}, claims(aud=[CLIENT, TRUSTED], azp=CLIENT))
S("aud-two-no-azp", {"alg": "ES256", "kid": "es"}, claims(aud=[CLIENT, TRUSTED]))
S("azp-wrong", {"alg": "ES256", "kid": "es"}, claims(azp="other"))
S("nbf-ok", {"alg": "ES256", "kid": "es"}, claims(nbf=NOW - 10))
S("nbf-string", {"alg": "ES256", "kid": "es"}, claims(nbf="now"))
S("no-at-hash", {"alg": "ES256", "kid": "es"}, claims(at_hash=None))
S("no-nonce", {"alg": "ES256", "kid": "es"}, claims(nonce=None))
S("exp-skew-edge", {"alg": "ES256", "kid": "es"}, claims(exp=NOW - SKEW + 1, iat=NOW + SKEW))
S("iat-int64-max", b'{"alg":"ES256","kid":"es"}', dumps(claims(iat=None))[:-1] + b',"iat":9223372036854775807}')
S("nbf-int64-max", b'{"alg":"ES256","kid":"es"}', dumps(claims())[:-1] + b',"nbf":9223372036854775807}')
S("exp-double-edge", b'{"alg":"ES256","kid":"es"}', dumps(claims(exp=None))[:-1] + b',"exp":8.9e15}')
S("exp-negative-double", b'{"alg":"ES256","kid":"es"}', dumps(claims(exp=None))[:-1] + b',"exp":-8.9e15}')
S("nested-everywhere", b'{"alg":"ES256","kid":"es","x5c":[[[["a"]]]],"jku":{"a":{"b":{}}}}',
  dumps(claims())[:-1] + b',"deep":' + nested + b',"obj":{"a":{"b":{"c":null}}}}')
S("alg-none", {"alg": "none", "kid": "es"}, claims())
S("alg-lowercase", {"alg": "es256", "kid": "es"}, claims())
S("crit", {"alg": "ES256", "kid": "es", "crit": []}, claims())
S("header-duplicate-alg", b'{"alg":"ES256","kid":"es","alg":"none"}', dumps(claims()))
S("payload-not-object", {"alg": "ES256", "kid": "es"}, b'["iss"]')
S("many-claims", {"alg": "ES256", "kid": "es"}, claims(**{f"c{i}": i for i in range(200)}))

# --- write --------------------------------------------------------------------
# Inputs the fuzzer found (regression-*) stay; only the generated seeds are replaced.
CORPUS.mkdir(parents=True, exist_ok=True)
for old in CORPUS.iterdir():
    if old.name[:2] in ("t-", "j-", "s-"):
        old.unlink()
for name, data in sorted(seeds.items()):
    (CORPUS / name).write_bytes(data)


def swift_string(s: str) -> str:
    return '"""\n' + s.rstrip("\n") + '\n"""'


SWIFT.parent.mkdir(parents=True, exist_ok=True)
SWIFT.write_text(f"""// Generated by Fuzz/gen-jwt-corpus.py together with Fuzz/corpus/jwt; regenerate
// both at once. Throwaway test keys: the seed tokens are signed with them.

enum Fixture {{
    static let issuer = {json.dumps(ISSUER)}
    static let clientID = {json.dumps(CLIENT)}
    static let trustedAudience = {json.dumps(TRUSTED)}
    static let nonce = {json.dumps(NONCE)}
    static let accessToken = {json.dumps(ACCESS)}
    static let now: Int64 = {NOW}
    static let clockSkew: Int64 = {SKEW}

    /// Public keys: "es" (ES256), "rs" (RS256), "ed" (EdDSA), "rs-noalg" (RSA, no alg).
    static let jwks = #\"\"\"
{json.dumps(JWKS, indent=2)}
\"\"\"#

    static let es256PEM = {swift_string(pem(es_key))}
    static let rs256PEM = {swift_string(pem(rs_key))}
    static let rs256NoAlgPEM = {swift_string(pem(rs_noalg_key))}
    /// The Ed25519 private key's 32 raw bytes, base64url.
    static let ed25519D = "{b64(ed_key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                                                    serialization.NoEncryption()))}"
}}
""")
print(f"wrote {len(seeds)} seeds to {CORPUS.relative_to(ROOT.parent)} and {SWIFT.relative_to(ROOT.parent)}")
