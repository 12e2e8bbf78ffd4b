#!/usr/bin/env python3
"""A strict, controllable OpenID Connect provider on loopback, for SessionVault's tests.

Run it with the venv python (scripts/provider-venv creates it):

    .venv/bin/python Tests/providers/strict_provider.py --profile bankid|vipps|generic [--port 0]

It binds 127.0.0.1 (an ephemeral port unless --port is given), prints exactly one line
``READY http://127.0.0.1:PORT`` on stdout once it accepts connections, and exits by itself
when its parent process dies, when --watch-pid dies, or after --idle-exit seconds without
requests. The issuer is exactly ``http://127.0.0.1:PORT`` (no trailing slash).

What it is strict about (a real provider may be laxer; the client must not rely on that):
  * /authorize: exact client_id; redirect_uri on loopback (http://127.0.0.1:ANYPORT/... or
    http://[::1]:ANYPORT/..., RFC 8252 -- "localhost" is refused) or, when redirect URIs are
    registered, an exact match; response_type=code; scope with openid; state and nonce
    required; PKCE required with S256 (missing or plain -> error=invalid_request);
    no repeated parameters. Errors before the redirect_uri is trusted give a 400 page,
    later errors are redirected (with state and iss).
  * /token: one-time codes (a replay is refused *and* revokes everything issued from that
    code), code lifetime, PKCE verifier, redirect_uri must equal the one in the request,
    client authentication (public client, or client_secret_basic / client_secret_post when a
    secret is configured, or private_key_jwt (RFC 7523) with --client-public-key: signature,
    iss = sub = client id, aud, exp at most 5 minutes ahead, a jti never seen before; never
    two methods at once).
  * Refresh tokens per profile: bankid rotates on every use with reuse detection (an old
    member of the family revokes the whole family), generic does not rotate (the response
    carries no new refresh token; keep the old one), vipps issues none.

Profiles (see PROFILES): bankid signs ID tokens with ES256 and changes `sub` on every login
(the stable subject is `bankid_altsub`; `nnin_altsub` is the national ID number); vipps signs
with RS256, puts only `sub` and standard claims in the ID token and gives profile claims
(name, phone_number, nin, ...) from userinfo only; generic signs with RS256.

Synthetic identities (test_user ids): kari, ola, ung (a minor, born 2012), dina (D-number).
Their national ID numbers are synthetic test numbers (month + 80) with valid mod-11 check
digits; GET /_admin/users lists them.

Admin API (loopback only; all bodies and answers are JSON):
  GET  /_admin/behavior                current behaviours
  POST /_admin/behavior                merge behaviours: {"name": value, ...}; a value of
                                       null/false removes it. A value may also be written
                                       {"value": v, "times": n, "grant": "refresh_token"}:
                                       used n times then cleared; token-endpoint and ID-token
                                       behaviours can be limited to one grant type.
  GET  /_admin/stats                   counters (see Provider.new_stats), and token_calls: one
                                       entry per /token request (the last 10,000) with its grant,
                                       HTTP status, start_ns/end_ns and ms: time.monotonic_ns(),
                                       i.e. CLOCK_MONOTONIC, so a benchmark on the same machine
                                       can place them on its own clock
  POST /_admin/reset                   behaviours, stats, codes, tokens, users, config back
                                       to the start values (signing keys are kept)
  POST /_admin/rotate-keys             {"keep_old": true} -> {"kid": new, "kids": [...]}
  GET  /_admin/users                   all users with their claims
  POST /_admin/users/<id>              merge claims into a user (creates it); null removes
  GET  /_admin/config, POST /_admin/config   runtime settings (see CONFIG_KEYS)
  POST /_admin/expire-tokens           {"access": true, "refresh": true}: expire what exists
  POST /_admin/introspect              {"token": t} -> {"active": bool, "kind": ..., ...}
Behaviours: see BEHAVIOURS below.

Only the standard library and `cryptography` are used. Signing is done by hand (a JWS is
three base64url parts) so that hostile tokens (alg none, HS256 keyed with the public key,
an unpublished kid, ...) are as easy to make as valid ones.
"""

from __future__ import annotations

import argparse
import base64
import copy
import hashlib
import hmac
import html
import json
import os
import secrets
import socket
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, unquote_plus, urlencode, urlsplit

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa, utils

# ---------------------------------------------------------------------------------------
# Small encoding helpers
# ---------------------------------------------------------------------------------------


def b64u(data: bytes) -> str:
    """base64url without padding (RFC 7515 section 2)."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64u_decode(text: str) -> bytes:
    """The inverse of b64u; padding is restored, anything else is a ValueError."""
    if not all(c.isalnum() or c in "-_" for c in text):
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def b64u_json(obj: object) -> str:
    return b64u(json.dumps(obj, separators=(",", ":")).encode("utf-8"))


def int_to_b64u(n: int, length: int | None = None) -> str:
    if length is None:
        length = max(1, (n.bit_length() + 7) // 8)
    return b64u(n.to_bytes(length, "big"))


ISSUED_LOG: str | None = None   # --issued-log: every secret handed out, for the secrets scan


def note_issued(kind: str, value: str) -> str:
    """Appends `kind<TAB>value` to the --issued-log file (tokens, codes, national IDs)."""
    if ISSUED_LOG and value:
        with open(ISSUED_LOG, "a", encoding="utf-8") as f:
            f.write(f"{kind}\t{value}\n")
    return value


def token_hash(token: str) -> str:
    """at_hash: left half of SHA-256 of the ASCII token (all our algs use SHA-256)."""
    digest = hashlib.sha256(token.encode("ascii")).digest()
    return b64u(digest[: len(digest) // 2])


def s256(verifier: str) -> str:
    return b64u(hashlib.sha256(verifier.encode("ascii")).digest())


PKCE_CHARS = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


# ---------------------------------------------------------------------------------------
# Signing keys
# ---------------------------------------------------------------------------------------


class SigningKey:
    """One asymmetric signing key with its public JWK; kid = RFC 7638 thumbprint."""

    def __init__(self, alg: str):
        self.alg = alg
        if alg == "ES256":
            self.private = ec.generate_private_key(ec.SECP256R1())
            nums = self.private.public_key().public_numbers()
            core = {"crv": "P-256", "kty": "EC",
                    "x": int_to_b64u(nums.x, 32), "y": int_to_b64u(nums.y, 32)}
        elif alg == "RS256":
            self.private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            nums = self.private.public_key().public_numbers()
            core = {"e": int_to_b64u(nums.e), "kty": "RSA", "n": int_to_b64u(nums.n)}
        else:
            raise ValueError(f"unsupported alg {alg}")
        # RFC 7638: members required for the key type, sorted, no whitespace.
        self.kid = b64u(hashlib.sha256(
            json.dumps(core, sort_keys=True, separators=(",", ":")).encode()).digest())
        self.jwk = dict(core, kid=self.kid, alg=alg, use="sig")

    def sign(self, signing_input: bytes) -> bytes:
        if self.alg == "ES256":
            der = self.private.sign(signing_input, ec.ECDSA(hashes.SHA256()))
            r, s = utils.decode_dss_signature(der)  # JWS wants raw r || s, 32 bytes each
            return r.to_bytes(32, "big") + s.to_bytes(32, "big")
        return self.private.sign(signing_input, padding.PKCS1v15(), hashes.SHA256())

    def public_pem(self) -> bytes:
        return self.private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def make_jws(header: dict, payload: dict, sign) -> str:
    signing_input = f"{b64u_json(header)}.{b64u_json(payload)}".encode("ascii")
    return signing_input.decode("ascii") + "." + b64u(sign(signing_input))


# ---------------------------------------------------------------------------------------
# Synthetic identities
# ---------------------------------------------------------------------------------------


def synthetic_nin(day: int, month: int, year: int, individual: int, d_number: bool = False) -> str:
    """A synthetic Norwegian national ID number (fødselsnummer or D-number).

    Synthetic test numbers add 80 to the month; D-numbers add 40 to the day. The individual
    number range encodes the century (1900-1999: 000-499, 2000-2039: 500-999). The first
    individual number >= `individual` whose two mod-11 check digits are both valid is used.
    """
    dd = day + (40 if d_number else 0)
    mm = month + 80
    for ind in range(individual, 1000):
        digits = [int(c) for c in f"{dd:02d}{mm:02d}{year % 100:02d}{ind:03d}"]
        k1 = 11 - sum(w * d for w, d in zip((3, 7, 6, 1, 8, 9, 4, 5, 2), digits)) % 11
        k1 = 0 if k1 == 11 else k1
        if k1 == 10:
            continue
        digits.append(k1)
        k2 = 11 - sum(w * d for w, d in zip((5, 4, 3, 2, 7, 6, 5, 4, 3, 2), digits)) % 11
        k2 = 0 if k2 == 11 else k2
        if k2 == 10:
            continue
        return "".join(map(str, digits)) + str(k2)
    raise ValueError("no valid individual number left")


def default_users() -> dict[str, dict]:
    """The test identities. `org` and `roles` stand for the member system's context."""
    def person(given, family, birthdate, nin, phone, org, roles):
        return {"given_name": given, "family_name": family, "name": f"{given} {family}",
                "birthdate": birthdate, "nin": nin, "phone_number": phone,
                "email": f"{given.lower()}.{family.lower()}@example.test",
                "email_verified": True, "org": org, "roles": roles}
    return {
        "kari": person("Kari", "Nordmann", "1985-03-15", synthetic_nin(15, 3, 1985, 123),
                       "4791234567", "mentor-oslo", ["mentor"]),
        "ola": person("Ola", "Nordmann", "1990-12-01", synthetic_nin(1, 12, 1990, 234),
                      "4798765432", "mentor-bergen", ["coordinator", "mentor"]),
        "ung": person("Unni", "Ung", "2012-06-20", synthetic_nin(20, 6, 2012, 512),
                      "4795555555", "mentor-oslo", ["mentee"]),
        "dina": person("Dina", "Dahl", "1979-07-05", synthetic_nin(5, 7, 1979, 345, d_number=True),
                       "4794444444", "mentor-tromso", ["mentor"]),
    }


# Claims that describe the person (rendered per profile); everything else a user has
# (org, roles, whatever /_admin/users adds) is an "extra" claim passed through as is.
IDENTITY_KEYS = {"given_name", "family_name", "name", "birthdate", "nin", "phone_number",
                 "email", "email_verified", "acr"}

# Stable per-provider identifiers derived from the user id.
NS = uuid.UUID("6f1d7a52-4b8e-4f55-9a36-2f0a1c7d9e10")


def stable_id(profile: str, user_id: str) -> str:
    return str(uuid.uuid5(NS, f"{profile}:{user_id}"))


# ---------------------------------------------------------------------------------------
# Profiles
# ---------------------------------------------------------------------------------------

PROFILES = {
    "bankid": {
        "display": "BankID (test)",
        "alg": "ES256",
        "refresh": "rotate",           # rotate + reuse detection
        "scopes": ["openid", "profile", "nnin_altsub", "email", "phone", "address"],
        "default_acr": "urn:bankid:bid;LOA=4",
    },
    "vipps": {
        "display": "Vipps (test)",
        "alg": "RS256",
        "refresh": None,               # no refresh tokens at all
        "scopes": ["openid", "name", "phoneNumber", "nin", "email", "birthDate", "address"],
    },
    "generic": {
        "display": "Generic OIDC (test)",
        "alg": "RS256",
        "refresh": "static",           # refresh token stays the same, not returned again
        "scopes": ["openid", "profile", "email", "phone", "nin", "offline_access"],
    },
}


def claims_for(profile: str, user_id: str, user: dict, scope: set[str], login_sub: str,
               where: str) -> dict:
    """Profile claims for the ID token (where="id_token") or userinfo (where="userinfo")."""
    extras = {k: v for k, v in user.items() if k not in IDENTITY_KEYS}
    out: dict = {}
    if profile == "bankid":
        out.update({"bankid_altsub": stable_id("bankid", user_id)})
        for k in ("name", "given_name", "family_name", "birthdate"):
            if k in user:
                out[k] = user[k]
        if user.get("nin"):
            out["nnin_altsub"] = user["nin"]
        if "email" in scope and "email" in user:
            out["email"] = user["email"]
        if "phone" in scope and "phone_number" in user:
            out["phone_number"] = user["phone_number"]
        if where == "id_token":
            out["acr"] = user.get("acr", PROFILES["bankid"]["default_acr"])
            out["amr"] = ["BID"]
        out.update(extras)
    elif profile == "vipps":
        if where == "id_token":
            return {}  # Vipps: profile claims come from userinfo only
        if "name" in scope:
            for k in ("name", "given_name", "family_name"):
                if k in user:
                    out[k] = user[k]
        if "phoneNumber" in scope and "phone_number" in user:
            out["phone_number"] = user["phone_number"]
        if "nin" in scope and user.get("nin"):
            out["nin"] = user["nin"]
        if "email" in scope and "email" in user:
            out["email"] = user["email"]
            out["email_verified"] = user.get("email_verified", False)
        if "birthDate" in scope and "birthdate" in user:
            out["birthdate"] = user["birthdate"]
        out.update(extras)
    else:  # generic
        if "profile" in scope:
            for k in ("name", "given_name", "family_name", "birthdate"):
                if k in user:
                    out[k] = user[k]
        if "email" in scope and "email" in user:
            out["email"] = user["email"]
            out["email_verified"] = user.get("email_verified", False)
        if "phone" in scope and "phone_number" in user:
            out["phone_number"] = user["phone_number"]
        if "nin" in scope and user.get("nin"):
            out["nin"] = user["nin"]
        if where == "id_token" and "acr" in user:
            out["acr"] = user["acr"]
        out.update(extras)
    out["sub"] = login_sub
    return out


# ---------------------------------------------------------------------------------------
# Behaviours (hostile / faulty) and runtime config
# ---------------------------------------------------------------------------------------

BEHAVIOURS = {
    # ID tokens (code exchange and refresh; "grant" can limit them to one grant type)
    "wrong_iss": "true or a string: ID token iss is ISSUER/other (or the string)",
    "wrong_aud": "true or a string: ID token aud is 'other-client' (or the string)",
    "extra_aud": "true or a string: aud is [client_id, 'other-client'], azp = client_id",
    "expired_id_token": "true or seconds: exp is that long ago (default 600)",
    "iat_in_future": "true or seconds: iat is that far ahead (default 3600)",
    "nonce_mismatch": "true: ID token nonce differs from the request's",
    "missing_nonce": "true: ID token has no nonce",
    "wrong_at_hash": "true: at_hash does not match the access token",
    "alg_none": "true: header alg none, empty signature",
    "hs256_with_public_key": "true: HS256, HMAC key = the signing key's public PEM",
    "unknown_kid": "true: signed with a valid key that is not in the JWKS",
    "no_kid": "true: validly signed, no kid in the header",
    # authorization response
    "mixup_iss": "true or a string: authorization response iss is another issuer",
    "no_iss_parameter": "true: no iss in the authorization response (still advertised)",
    "error_and_code": "true or an error code: redirect has both error and a valid code",
    "authorize_error": "true (= access_denied) or an error code, e.g. server_error",
    "signed_in_as": "a test user id: the browser is signed in at the provider already (its "
                    "session cookie, as after an earlier login), so /authorize logs that user "
                    "in without a page to click on (test_user / sub still win)",
    # token endpoint ("grant" can limit them to one grant type)
    "token_error": "an OAuth error code (400 JSON; invalid_client 401) or an HTTP status "
                   "(number: that status with a non-JSON body); optional \"status\" key",
    "huge_token_response": "true or bytes: a valid token response padded to 10 MiB (or bytes)",
    "malformed_token_response": "true: HTTP 200 with a body that is not JSON, before the grant is "
                                "looked at (nothing is used up or rotated)",
    "slow_token": "seconds: sleep before answering the token endpoint",
    # userinfo
    "userinfo_sub_mismatch": "true: userinfo sub differs from the ID token's",
    # transport / any endpoint
    "drop_connection": "true (= token) or an endpoint name or list: close without answering",
    "endpoint_status": "object {endpoint: status}: answer that endpoint with that HTTP status",
    "slow": "object {endpoint: seconds}: sleep before answering that endpoint",
    "discovery_issuer_mismatch": "true: discovery 'issuer' differs from the URL it came from",
}
ENDPOINTS = {"discovery", "authorize", "token", "userinfo", "jwks", "revoke"}

CONFIG_KEYS = {
    "client_id": str,
    "client_secret": (str, type(None)),      # null = public client
    "client_auth_methods": list,             # accepted when a secret or a client key is set
    # The client's public key (PEM) for private_key_jwt (RFC 7523 2.2; what BankID
    # recommends for the organization's backend): null = none registered.
    "client_public_key": (str, type(None)),
    "redirect_uris": list,                   # [] = any loopback URI (RFC 8252)
    "access_ttl": int, "refresh_ttl": int, "id_token_ttl": int, "code_ttl": int,
    "iss_parameter_supported": bool,
    "require_nonce": bool,
    "id_token_on_refresh": bool,
    # The previous refresh token stays usable until its successor is first used
    # (Auth0's and Okta's rotation overlap): a client that crashed before
    # storing the successor it never saw can still refresh. Reuse of anything
    # older, or of a token whose successor was used, still revokes the family.
    "rotation_grace": bool,
}


class AdminError(Exception):
    pass


class Provider:
    """All state, guarded by one lock. Handlers call into it; it never does I/O."""

    def __init__(self, profile: str, config: dict):
        self.profile = profile
        self.p = PROFILES[profile]
        self.lock = threading.RLock()
        self.start_config = dict(config)
        self.issuer = ""
        self.keys = [SigningKey(self.p["alg"])]        # keys[-1] signs; all are published
        self.rogue_key = SigningKey(self.p["alg"])     # never published (unknown_kid)
        self.last_activity = time.monotonic()
        self.in_flight_token = 0
        # Token answers written but not yet in stats["token_calls"]: /_admin/stats waits
        # for them, so a client that has its answer always finds the call counted.
        self.unrecorded_answers = 0
        self.recorded = threading.Condition(self.lock)
        self.reset()

    # --- lifecycle -------------------------------------------------------------------
    def reset(self):
        with self.lock:
            self.config = copy.deepcopy(self.start_config)
            self.behaviours: dict[str, dict] = {}
            self.users = default_users()
            self.codes: dict[str, dict] = {}
            self.access: dict[str, dict] = {}
            self.refresh: dict[str, dict] = {}
            self.families: dict[str, dict] = {}
            self.seen_jtis: dict[str, float] = {}   # private_key_jwt: jti -> exp
            self.stats = self.new_stats()

    @staticmethod
    def new_stats() -> dict:
        return {
            "requests": {e: 0 for e in sorted(ENDPOINTS | {"login_page", "admin"})},
            "token_grants": {"authorization_code": 0, "refresh_token": 0, "other": 0},
            "token_errors": {},            # error code (or HTTP status) -> count
            "client_auth": {},             # none / client_secret_basic / client_secret_post / private_key_jwt
            "logins": {},                  # user id -> codes issued
            "codes_issued": 0,
            "code_replays": 0,
            "refresh_reuse_detected": 0,
            "refresh_grace_used": 0,       # a rotated token accepted under rotation_grace
            "last_rotation_ns": None,      # time.monotonic_ns() when a refresh token was last rotated
            "families_revoked": 0,
            "revocations": {"access_token": 0, "refresh_token": 0, "unknown": 0},
            "max_concurrent_token": 0,
            "behaviours_applied": {},      # behaviour name -> times it took effect
            "last_authorize": None,        # the parameters of the last /authorize request
            "last_token_request": None,    # form parameters + "client_auth" of the last /token
            "token_calls": [],             # per /token request: grant, status, start_ns, end_ns, ms
        }

    TOKEN_CALLS_KEPT = 10_000

    def answering_token(self):
        with self.lock:
            self.unrecorded_answers += 1

    def record_token_call(self, grant: str | None, status: int | None, start_ns: int, end_ns: int,
                          answered: bool):
        """How long one /token request took here, from its headers parsed to its answer
        written (benchmarks subtract it from what their client saw)."""
        with self.lock:
            if answered:
                self.unrecorded_answers -= 1
                self.recorded.notify_all()
            calls = self.stats["token_calls"]
            calls.append({"grant": grant, "status": status, "start_ns": start_ns, "end_ns": end_ns,
                          "ms": (end_ns - start_ns) / 1e6})
            if len(calls) > self.TOKEN_CALLS_KEPT:
                del calls[: len(calls) - self.TOKEN_CALLS_KEPT]

    def count(self, *path, by=1):
        with self.lock:
            d = self.stats
            for k in path[:-1]:
                d = d.setdefault(k, {})
            d[path[-1]] = d.get(path[-1], 0) + by

    # --- behaviours --------------------------------------------------------------------
    def set_behaviours(self, body: dict) -> dict:
        if not isinstance(body, dict):
            raise AdminError("body must be a JSON object")
        unknown = [k for k in body if k not in BEHAVIOURS]
        if unknown:
            raise AdminError(f"unknown behaviour(s) {unknown}; known: {sorted(BEHAVIOURS)}")
        with self.lock:
            for name, v in body.items():
                if v is None or v is False:
                    self.behaviours.pop(name, None)
                    continue
                entry = {"value": v, "times": None, "grant": None}
                if isinstance(v, dict) and "value" in v:
                    entry = {"value": v["value"], "times": v.get("times"), "grant": v.get("grant")}
                    extra = set(v) - {"value", "times", "grant", "status"}
                    if extra:
                        raise AdminError(f"{name}: unknown keys {sorted(extra)}")
                    if "status" in v:
                        entry["status"] = v["status"]
                if entry["times"] is not None and (not isinstance(entry["times"], int)
                                                   or entry["times"] < 1):
                    raise AdminError(f"{name}: times must be a positive integer")
                if entry["grant"] not in (None, "authorization_code", "refresh_token"):
                    raise AdminError(f"{name}: grant must be authorization_code or refresh_token")
                if name in ("endpoint_status", "slow"):
                    if not isinstance(entry["value"], dict) or not set(entry["value"]) <= ENDPOINTS:
                        raise AdminError(f"{name}: value must be an object keyed by {sorted(ENDPOINTS)}")
                if name == "drop_connection":
                    targets = entry["value"]
                    targets = ["token"] if targets is True else (
                        [targets] if isinstance(targets, str) else targets)
                    if not isinstance(targets, list) or not set(targets) <= ENDPOINTS:
                        raise AdminError(f"drop_connection: endpoints are {sorted(ENDPOINTS)}")
                    entry["value"] = targets
                self.behaviours[name] = entry
            return self.behaviours_view()

    def behaviours_view(self) -> dict:
        with self.lock:
            return copy.deepcopy(self.behaviours)

    def take(self, name: str, grant: str | None = None, match=None):
        """The behaviour's entry if it applies now (consuming one of its `times`), else None."""
        with self.lock:
            entry = self.behaviours.get(name)
            if entry is None:
                return None
            if entry["grant"] is not None and grant is not None and entry["grant"] != grant:
                return None
            if match is not None and not match(entry["value"]):
                return None
            if entry["times"] is not None:
                entry["times"] -= 1
                if entry["times"] <= 0:
                    del self.behaviours[name]
            self.count("behaviours_applied", name)
            return entry

    def takev(self, name: str, grant: str | None = None):
        entry = self.take(name, grant)
        return None if entry is None else entry["value"]

    # --- config ------------------------------------------------------------------------
    def set_config(self, body: dict) -> dict:
        if not isinstance(body, dict):
            raise AdminError("body must be a JSON object")
        for k, v in body.items():
            if k not in CONFIG_KEYS:
                raise AdminError(f"unknown config key {k}; known: {sorted(CONFIG_KEYS)}")
            if not isinstance(v, CONFIG_KEYS[k]) or (CONFIG_KEYS[k] is int and isinstance(v, bool)):
                raise AdminError(f"config {k}: wrong type")
        with self.lock:
            self.config.update(body)
            return dict(self.config)

    # --- keys --------------------------------------------------------------------------
    def rotate_keys(self, keep_old: bool) -> dict:
        new = SigningKey(self.p["alg"])
        with self.lock:
            self.keys = (self.keys if keep_old else []) + [new]
            return {"kid": new.kid, "kids": [k.kid for k in self.keys]}

    @property
    def signing_key(self) -> SigningKey:
        return self.keys[-1]

    def jwks(self) -> dict:
        with self.lock:
            return {"keys": [dict(k.jwk) for k in self.keys]}

    # --- discovery ---------------------------------------------------------------------
    def discovery(self) -> dict:
        c = self.config
        iss = self.issuer
        confidential = c["client_secret"] is not None or c["client_public_key"] is not None
        auth_methods = list(c["client_auth_methods"]) if confidential else ["none"]
        grants = ["authorization_code"] + (["refresh_token"] if self.p["refresh"] else [])
        doc = {
            "issuer": iss + "/" if self.takev("discovery_issuer_mismatch") else iss,
            "authorization_endpoint": iss + "/authorize",
            "token_endpoint": iss + "/token",
            "userinfo_endpoint": iss + "/userinfo",
            "jwks_uri": iss + "/jwks",
            "revocation_endpoint": iss + "/revoke",
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": grants,
            "subject_types_supported": ["pairwise" if self.profile == "bankid" else "public"],
            "id_token_signing_alg_values_supported": [self.p["alg"]],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": auth_methods,
            "revocation_endpoint_auth_methods_supported": auth_methods,
            "token_endpoint_auth_signing_alg_values_supported": ["RS256", "ES256"],
            "scopes_supported": list(self.p["scopes"]),
            "claims_parameter_supported": False,
            "request_parameter_supported": False,
            "authorization_response_iss_parameter_supported": bool(c["iss_parameter_supported"]),
        }
        if self.profile == "bankid":
            doc["acr_values_supported"] = ["urn:bankid:bid;LOA=3", "urn:bankid:bid;LOA=4"]
        return doc

    # --- ID tokens ---------------------------------------------------------------------
    def mint_id_token(self, fam: dict, access_token: str, nonce: str | None, grant: str) -> str:
        now = int(time.time())
        c = self.config
        user = self.users.get(fam["user"], {})
        scope = set(fam["scope"].split())
        claims = claims_for(self.profile, fam["user"], user, scope, fam["login_sub"], "id_token")
        cid = fam["client_id"]
        claims.update({"iss": self.issuer, "sub": fam["login_sub"], "aud": cid, "azp": cid,
                       "exp": now + c["id_token_ttl"], "iat": now, "auth_time": fam["auth_time"],
                       "at_hash": token_hash(access_token)})
        if nonce is not None:
            claims["nonce"] = nonce
        # Hostile claim changes.
        if (v := self.takev("wrong_iss", grant)) is not None:
            claims["iss"] = v if isinstance(v, str) else self.issuer + "/other"
        if (v := self.takev("wrong_aud", grant)) is not None:
            claims["aud"] = v if isinstance(v, str) else "other-client"
        if (v := self.takev("extra_aud", grant)) is not None:
            claims["aud"] = [cid, v if isinstance(v, str) else "other-client"]
        if (v := self.takev("expired_id_token", grant)) is not None:
            ago = 600 if v is True else int(v)
            claims["exp"] = now - ago
            claims["iat"] = claims["exp"] - c["id_token_ttl"]
        if (v := self.takev("iat_in_future", grant)) is not None:
            ahead = 3600 if v is True else int(v)
            claims["iat"] = now + ahead
            claims["exp"] = claims["iat"] + c["id_token_ttl"]
        if self.takev("nonce_mismatch", grant) is not None:
            claims["nonce"] = "mismatch-" + secrets.token_urlsafe(8)
        if self.takev("missing_nonce", grant) is not None:
            claims.pop("nonce", None)
        if self.takev("wrong_at_hash", grant) is not None:
            claims["at_hash"] = token_hash("not-" + access_token)
        # Hostile signatures.
        key = self.signing_key
        if self.takev("alg_none", grant) is not None:
            return f"{b64u_json({'alg': 'none', 'typ': 'JWT'})}.{b64u_json(claims)}."
        if self.takev("hs256_with_public_key", grant) is not None:
            pem = key.public_pem()
            return make_jws({"alg": "HS256", "typ": "JWT", "kid": key.kid}, claims,
                            lambda m: hmac.new(pem, m, hashlib.sha256).digest())
        if self.takev("unknown_kid", grant) is not None:
            key = self.rogue_key
        header = {"alg": key.alg, "typ": "JWT", "kid": key.kid}
        if self.takev("no_kid", grant) is not None:
            del header["kid"]
        return note_issued("token", make_jws(header, claims, key.sign))

    # --- users ---------------------------------------------------------------------------
    def update_user(self, user_id: str, body: dict) -> dict:
        if not isinstance(body, dict):
            raise AdminError("body must be a JSON object of claims")
        with self.lock:
            user = self.users.setdefault(user_id, {})
            for k, v in body.items():
                if v is None:
                    user.pop(k, None)
                else:
                    user[k] = v
            if isinstance(user.get("nin"), str):
                note_issued("nin", user["nin"])
            return dict(user)

    # --- tokens --------------------------------------------------------------------------
    def new_family(self, code: dict) -> dict:
        fam = {"id": secrets.token_hex(8), "user": code["user"], "login_sub": code["login_sub"],
               "client_id": code["client_id"], "scope": code["scope"],
               "auth_time": code["auth_time"], "revoked": False,
               "refresh_tokens": [], "access_tokens": []}
        self.families[fam["id"]] = fam
        return fam

    def issue_access(self, fam: dict, scope: str) -> str:
        tok = secrets.token_urlsafe(32)
        self.access[tok] = {"family": fam["id"], "scope": scope, "revoked": False,
                            "exp": time.time() + self.config["access_ttl"]}
        fam["access_tokens"].append(tok)
        return note_issued("token", tok)

    def issue_refresh(self, fam: dict) -> str:
        tok = secrets.token_urlsafe(48)
        self.refresh[tok] = {"family": fam["id"], "state": "active",
                             "exp": time.time() + self.config["refresh_ttl"]}
        fam["refresh_tokens"].append(tok)
        return note_issued("token", tok)

    def revoke_family(self, fam: dict, why: str):
        if not fam["revoked"]:
            self.stats["families_revoked"] += 1
        fam["revoked"] = why
        for t in fam["refresh_tokens"]:
            self.refresh[t]["state"] = "revoked"
        for t in fam["access_tokens"]:
            self.access[t]["revoked"] = True

    def introspect(self, token: str) -> dict:
        with self.lock:
            now = time.time()
            if token in self.access:
                a = self.access[token]
                fam = self.families[a["family"]]
                return {"active": not a["revoked"] and now < a["exp"], "kind": "access_token",
                        "revoked": a["revoked"], "expired": now >= a["exp"],
                        "family": fam["id"], "family_revoked": fam["revoked"], "user": fam["user"]}
            if token in self.refresh:
                r = self.refresh[token]
                fam = self.families[r["family"]]
                return {"active": r["state"] == "active" and now < r["exp"], "kind": "refresh_token",
                        "state": r["state"], "expired": now >= r["exp"],
                        "family": fam["id"], "family_revoked": fam["revoked"], "user": fam["user"]}
            return {"active": False, "kind": None}

    def expire_tokens(self, access: bool, refresh: bool) -> dict:
        with self.lock:
            past = time.time() - 1
            if access:
                for a in self.access.values():
                    a["exp"] = past
            if refresh:
                for r in self.refresh.values():
                    r["exp"] = past
            return {"access_tokens": len(self.access) if access else 0,
                    "refresh_tokens": len(self.refresh) if refresh else 0}


# ---------------------------------------------------------------------------------------
# HTTP
# ---------------------------------------------------------------------------------------


class OAuthError(Exception):
    def __init__(self, error: str, description: str = "", status: int = 400):
        super().__init__(error)
        self.error, self.description, self.status = error, description, status


class Dropped(Exception):
    """Raised to close the connection without an answer."""


PROVIDER: Provider  # set in main()


def is_loopback_redirect(uri: str) -> tuple[bool, str]:
    try:
        parts = urlsplit(uri)
        port = parts.port
    except ValueError:
        return False, "redirect_uri is not a valid URI"
    if parts.scheme != "http":
        return False, "a loopback redirect_uri must use http (RFC 8252 section 7.3)"
    if parts.hostname not in ("127.0.0.1", "::1"):
        return False, "redirect_uri must be on 127.0.0.1 or [::1] (RFC 8252 section 7.3; 'localhost' is not accepted)"
    if port is None:
        return False, "a loopback redirect_uri needs an explicit port"
    if parts.fragment or "#" in uri:
        return False, "redirect_uri must not contain a fragment"
    if parts.username or parts.password:
        return False, "redirect_uri must not contain user info"
    return True, ""


def add_query(uri: str, params: list[tuple[str, str]]) -> str:
    sep = "&" if urlsplit(uri).query else "?"
    return uri + sep + urlencode(params)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "StrictOIDC/1"
    timeout = 60  # an idle keep-alive connection is closed after this

    # --- plumbing ------------------------------------------------------------------------
    def setup(self):
        super().setup()
        # An answer is written as head, then body: with Nagle on, the body waits for the
        # ACK of the head, which a keep-alive client delays by up to 40 ms. Real servers
        # send without that stall; so must this one, or every reused connection is slow.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format, *args):  # noqa: A002 - signature from the base class
        if self.server.verbose:
            sys.stderr.write("strict_provider: %s %s\n" % (self.address_string(), format % args))

    def do_GET(self):
        self.dispatch("GET")

    def do_POST(self):
        self.dispatch("POST")

    def do_PUT(self):
        self.dispatch("PUT")

    def do_DELETE(self):
        self.dispatch("DELETE")

    def read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        n = int(self.headers.get("Content-Length") or 0)
        if n > 1 << 20:
            raise OAuthError("invalid_request", "request body too large", 413)
        return self.rfile.read(n) if n else b""

    def send(self, status: int, body: bytes, ctype: str, headers: dict | None = None):
        if self.token_grant is not None and self.sent_status is None:
            PROVIDER.answering_token()  # before the client can see the answer
        self.sent_status = status
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        try:
            for i in range(0, len(body), 1 << 16):
                self.wfile.write(body[i:i + (1 << 16)])
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        self.answered_ns = time.monotonic_ns()

    def send_json(self, status: int, obj, headers: dict | None = None):
        self.send(status, json.dumps(obj).encode(), "application/json", headers)

    def send_html(self, status: int, body: str):
        self.send(status, body.encode(), "text/html; charset=utf-8")

    def redirect(self, location: str):
        self.send(302, b"", "text/plain", {"Location": location})

    def drop(self):
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def dispatch(self, method: str):
        P = PROVIDER
        started = time.monotonic_ns()
        P.last_activity = time.monotonic()
        self.sent_status = None
        self.answered_ns = None
        self.token_grant = None
        endpoint = None
        url = urlsplit(self.path)
        path = url.path
        routes = {
            "/.well-known/openid-configuration": ("discovery", self.h_discovery),
            "/authorize": ("authorize", self.h_authorize),
            "/token": ("token", self.h_token),
            "/userinfo": ("userinfo", self.h_userinfo),
            "/jwks": ("jwks", self.h_jwks),
            "/revoke": ("revoke", self.h_revoke),
        }
        try:
            if path.startswith("/_admin/"):
                if self.client_address[0] != "127.0.0.1":
                    return self.send_json(403, {"error": "admin API is loopback only"})
                P.count("requests", "admin")
                return self.h_admin(method, path)
            if path not in routes:
                return self.send_json(404, {"error": "not_found", "path": path})
            endpoint, fn = routes[path]
            P.count("requests", endpoint)
            # Transport-level behaviours that apply to any endpoint.
            if P.take("drop_connection", match=lambda targets: endpoint in targets):
                raise Dropped()
            slow = P.behaviours.get("slow")
            if slow and endpoint in slow["value"] and P.take("slow"):
                time.sleep(float(slow["value"][endpoint]))
            st = P.behaviours.get("endpoint_status")
            if st and endpoint in st["value"] and P.take("endpoint_status"):
                status = int(st["value"][endpoint])
                return self.send(status, f"{status} from endpoint_status behaviour\n".encode(),
                                 "text/plain")
            return fn(method, url)
        except Dropped:
            return self.drop()
        except OAuthError as e:
            return self.send_json(e.status, {"error": e.error, "error_description": e.description})
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as e:  # a bug here must not look like a hostile behaviour: say so
            sys.stderr.write(f"strict_provider: internal error: {e!r}\n")
            import traceback
            traceback.print_exc()
            try:
                self.send_json(500, {"error": "server_error",
                                     "error_description": f"strict_provider bug: {e!r}"})
            except OSError:
                pass
        finally:
            if endpoint == "token":
                P.record_token_call(self.token_grant, self.sent_status, started,
                                    self.answered_ns or time.monotonic_ns(),
                                    answered=self.token_grant is not None and self.sent_status is not None)

    # --- parameter parsing ---------------------------------------------------------------
    def form(self) -> list[tuple[str, str]]:
        ctype = self.headers.get("Content-Type", "")
        body = self.read_body()
        if not body:
            return []
        if not ctype.lower().startswith("application/x-www-form-urlencoded"):
            raise OAuthError("invalid_request", "body must be application/x-www-form-urlencoded")
        return parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)

    @staticmethod
    def single(pairs: list[tuple[str, str]]) -> tuple[dict, list[str]]:
        """Pairs -> dict, plus the names that were repeated (RFC 6749 section 3.1)."""
        out, dup = {}, []
        for k, v in pairs:
            if k in out:
                dup.append(k)
            out[k] = v
        return out, dup

    # --- endpoints -----------------------------------------------------------------------
    def h_discovery(self, method, url):
        self.send_json(200, PROVIDER.discovery())

    def h_jwks(self, method, url):
        self.send_json(200, PROVIDER.jwks())

    def h_authorize(self, method, url):
        P = PROVIDER
        pairs = parse_qsl(url.query, keep_blank_values=True)
        if method == "POST":
            pairs += self.form()
        elif method != "GET":
            return self.send_json(405, {"error": "method not allowed"})
        params, dups = self.single(pairs)
        with P.lock:
            P.stats["last_authorize"] = dict(params)
            cfg = dict(P.config)

        # 1. Errors that must not be redirected: unknown client or untrusted redirect_uri.
        if params.get("client_id") != cfg["client_id"]:
            return self.error_page(f"Unknown client_id {params.get('client_id')!r}.")
        redirect_uri = params.get("redirect_uri")
        if not redirect_uri:
            return self.error_page("redirect_uri is missing.")
        if cfg["redirect_uris"]:
            if redirect_uri not in cfg["redirect_uris"]:
                return self.error_page(f"redirect_uri {redirect_uri!r} is not registered "
                                       f"(registered: {cfg['redirect_uris']}).")
        else:
            ok, why = is_loopback_redirect(redirect_uri)
            if not ok:
                return self.error_page(why)
        if "redirect_uri" in dups or "client_id" in dups:
            return self.error_page("client_id / redirect_uri given more than once.")

        state = params.get("state")
        iss_params: list[tuple[str, str]] = []
        if cfg["iss_parameter_supported"] and not P.takev("no_iss_parameter"):
            mix = P.takev("mixup_iss")
            iss_params = [("iss", mix if isinstance(mix, str) else
                           (P.issuer.rsplit(":", 1)[0] + ":1" if mix else P.issuer))]

        def fail(error: str, description: str):
            resp = [("error", error), ("error_description", description)]
            if state is not None:
                resp.append(("state", state))
            return self.redirect(add_query(redirect_uri, resp + iss_params))

        # 2. Errors that are redirected to the client.
        if dups:
            return fail("invalid_request", f"parameters repeated: {sorted(set(dups))}")
        if params.get("response_type") != "code":
            return fail("unsupported_response_type", "only response_type=code is supported")
        if params.get("response_mode", "query") != "query":
            return fail("invalid_request", "only response_mode=query is supported")
        if "openid" not in params.get("scope", "").split():
            return fail("invalid_scope", "scope must contain openid")
        if not state:
            return fail("invalid_request", "state is required")
        if cfg["require_nonce"] and not params.get("nonce"):
            return fail("invalid_request", "nonce is required")
        challenge = params.get("code_challenge")
        if not challenge:
            return fail("invalid_request", "PKCE is required: code_challenge is missing")
        if params.get("code_challenge_method") != "S256":
            return fail("invalid_request", "PKCE code_challenge_method must be S256 "
                        f"(got {params.get('code_challenge_method', 'none, which means plain')})")
        if len(challenge) != 43 or not set(challenge) <= PKCE_CHARS:
            return fail("invalid_request", "code_challenge must be a base64url SHA-256 (43 chars)")

        # 3. Login: automated with test_user (query) / sub (form), else a page to click on.
        user_id = params.get("test_user") or params.get("sub")
        if not user_id and params.get("action") != "cancel":
            signed_in = P.take("signed_in_as")
            user_id = str(signed_in["value"]) if signed_in else None
        if params.get("action") == "cancel":
            return fail("access_denied", "the user cancelled the login")
        if not user_id:
            if method == "GET":
                return self.login_page(params)
            return self.error_page("No user chosen.")
        with P.lock:
            known = user_id in P.users
        if not known:
            return self.error_page(f"Unknown test user {user_id!r}; known: {sorted(P.users)}")

        # 4. The authorization response, possibly hostile.
        v = P.takev("authorize_error")
        if v is not None:
            return fail("access_denied" if v is True else str(v), "authorize_error behaviour")
        now = time.time()
        code = note_issued("code", secrets.token_urlsafe(32))
        login_sub = (str(uuid.uuid4()) if self.server.profile == "bankid" else
                     stable_id("vipps", user_id) if self.server.profile == "vipps" else user_id)
        granted = [s for s in params["scope"].split() if s in PROFILES[self.server.profile]["scopes"]]
        with P.lock:
            P.codes[code] = {"client_id": cfg["client_id"], "redirect_uri": redirect_uri,
                             "user": user_id, "login_sub": login_sub, "scope": " ".join(granted),
                             "nonce": params.get("nonce"), "challenge": challenge,
                             "exp": now + cfg["code_ttl"], "auth_time": int(now),
                             "used": False, "family": None}
            P.stats["codes_issued"] += 1
            P.count("logins", user_id)
        resp = [("code", code), ("state", state)]
        v = P.takev("error_and_code")
        if v is not None:
            resp.append(("error", "access_denied" if v is True else str(v)))
        return self.redirect(add_query(redirect_uri, resp + iss_params))

    def error_page(self, message: str):
        self.send_html(400, "<!doctype html><html lang=en><title>Login error</title>"
                       f"<h1>Login error</h1><p>{html.escape(message)}</p></html>")

    def login_page(self, params: dict):
        P = PROVIDER
        PROVIDER.count("requests", "login_page")
        hidden = "".join(f'<input type=hidden name="{html.escape(k)}" value="{html.escape(v)}">'
                         for k, v in params.items())
        with P.lock:
            users = sorted(P.users.items())
        buttons = "".join(
            f'<p><button name=sub value="{html.escape(uid)}">Log in as '
            f'{html.escape(str(u.get("name", uid)))} ({html.escape(uid)})</button></p>'
            for uid, u in users)
        title = html.escape(PROFILES[self.server.profile]["display"])
        self.send_html(200, f"<!doctype html><html lang=en><title>{title}</title>"
                       f"<h1>{title}</h1><p>Synthetic test identities. Choose one:</p>"
                       f'<form method=post action="/authorize">{hidden}{buttons}'
                       f'<p><button name=action value=cancel>Cancel</button></p></form></html>')

    # --- client authentication -----------------------------------------------------------
    def client_auth(self, params: dict, record: bool = True) -> tuple[str, str]:
        """(client_id, method) or OAuthError invalid_client / invalid_request."""
        P = PROVIDER
        cfg = P.config
        basic = self.headers.get("Authorization", "")
        b_id = b_secret = None
        if basic.lower().startswith("basic "):
            try:
                raw = base64.b64decode(basic[6:].strip(), validate=True).decode("utf-8")
                b_id, _, b_secret = raw.partition(":")
                b_id, b_secret = unquote_plus(b_id), unquote_plus(b_secret)  # RFC 6749 2.3.1
            except (ValueError, UnicodeDecodeError):
                raise OAuthError("invalid_client", "malformed Basic authorization", 401)
        assertion = "client_assertion" in params or "client_assertion_type" in params
        if sum([b_id is not None, "client_secret" in params, assertion]) > 1:
            raise OAuthError("invalid_request", "more than one client authentication method")
        if assertion:
            with P.lock:
                if record:
                    P.count("client_auth", "private_key_jwt")
                if record and P.stats["last_token_request"] is not None:
                    P.stats["last_token_request"]["client_auth"] = "private_key_jwt"
            cid = self.client_assertion(params)
            if "private_key_jwt" not in cfg["client_auth_methods"]:
                raise OAuthError("invalid_client", "private_key_jwt is not allowed for this client", 401)
            return cid, "private_key_jwt"
        if b_id is not None:
            cid, secret, method = b_id, b_secret, "client_secret_basic"
            if "client_id" in params and params["client_id"] != b_id:
                raise OAuthError("invalid_request", "client_id differs from Basic user")
        elif "client_secret" in params:
            cid, secret, method = params.get("client_id"), params["client_secret"], "client_secret_post"
        else:
            cid, secret, method = params.get("client_id"), None, "none"
        with P.lock:
            if record:
                P.count("client_auth", method)
            if record and P.stats["last_token_request"] is not None:
                P.stats["last_token_request"]["client_auth"] = method
        challenge = {"WWW-Authenticate": 'Basic realm="strict_provider"'}
        if cid != cfg["client_id"]:
            raise OAuthError("invalid_client", f"unknown client {cid!r}", 401)
        if cfg["client_secret"] is None and cfg["client_public_key"] is None:
            return cid, method  # public client; a secret, if sent, is ignored
        if cfg["client_secret"] is None:
            raise OAuthError("invalid_client", "this client authenticates with private_key_jwt", 401)
        if method == "none":
            raise OAuthError("invalid_client", "client authentication required", 401)
        if method not in cfg["client_auth_methods"]:
            raise OAuthError("invalid_client", f"{method} is not allowed for this client", 401)
        if not hmac.compare_digest((secret or "").encode(), cfg["client_secret"].encode()):
            raise OAuthError("invalid_client", "wrong client secret", 401)
        return cid, method

    def client_assertion(self, params: dict) -> str:
        """RFC 7523 2.2 / OIDC Core 9 private_key_jwt: a JWT signed with the client's
        registered key, iss = sub = client_id, aud = this token endpoint (or the
        issuer), a short life, and a jti never seen before (a replayed assertion
        is refused). Returns the client id; OAuthError invalid_client otherwise."""
        P = PROVIDER
        cfg = P.config

        def refuse(why: str):
            return OAuthError("invalid_client", f"client_assertion: {why}", 401)
        if params.get("client_assertion_type") != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer":
            raise OAuthError("invalid_request", "client_assertion_type must be jwt-bearer")
        token = params.get("client_assertion", "")
        parts = token.split(".")
        if len(parts) != 3:
            raise refuse("not a JWS")
        try:
            header = json.loads(b64u_decode(parts[0]))
            claims = json.loads(b64u_decode(parts[1]))
            signature = b64u_decode(parts[2])
        except (ValueError, UnicodeDecodeError):
            raise refuse("malformed") from None
        if not isinstance(header, dict) or not isinstance(claims, dict):
            raise refuse("malformed")
        if cfg["client_public_key"] is None:
            raise refuse("no key registered for this client")
        key = serialization.load_pem_public_key(cfg["client_public_key"].encode())
        signing_input = (parts[0] + "." + parts[1]).encode("ascii")
        alg = header.get("alg")
        try:
            if alg == "RS256" and isinstance(key, rsa.RSAPublicKey):
                key.verify(signature, signing_input, padding.PKCS1v15(), hashes.SHA256())
            elif alg == "ES256" and isinstance(key, ec.EllipticCurvePublicKey) and len(signature) == 64:
                der = utils.encode_dss_signature(int.from_bytes(signature[:32], "big"),
                                                 int.from_bytes(signature[32:], "big"))
                key.verify(der, signing_input, ec.ECDSA(hashes.SHA256()))
            else:
                raise refuse(f"alg {alg!r} does not fit the registered key")
        except InvalidSignature:
            raise refuse("bad signature") from None
        now = time.time()
        audiences = claims.get("aud") if isinstance(claims.get("aud"), list) else [claims.get("aud")]
        if claims.get("iss") != cfg["client_id"] or claims.get("sub") != cfg["client_id"]:
            raise refuse("iss and sub must be the client id")
        if params.get("client_id") not in (None, cfg["client_id"]):
            raise OAuthError("invalid_request", "client_id differs from the assertion")
        if not {P.issuer + "/token", P.issuer, P.issuer + "/"} & set(audiences):
            raise refuse("aud is not this token endpoint")
        exp, jti = claims.get("exp"), claims.get("jti")
        if not isinstance(exp, (int, float)) or exp <= now or exp > now + 300:
            raise refuse("exp missing, past, or more than 5 minutes ahead")
        if not isinstance(jti, str) or not jti:
            raise refuse("jti missing")
        with P.lock:
            P.seen_jtis = {j: e for j, e in P.seen_jtis.items() if e > now}
            if jti in P.seen_jtis:
                raise refuse("jti replayed")
            P.seen_jtis[jti] = exp
        return cfg["client_id"]

    # --- token endpoint ------------------------------------------------------------------
    def h_token(self, method, url):
        P = PROVIDER
        if method != "POST":
            return self.send_json(405, {"error": "invalid_request", "error_description": "POST only"})
        pairs = self.form()
        params, dups = self.single(pairs)
        grant = params.get("grant_type", "")
        self.token_grant = grant
        P.count("token_grants", grant if grant in ("authorization_code", "refresh_token") else "other")
        with P.lock:
            P.stats["last_token_request"] = dict(params)
            P.in_flight_token += 1
            P.stats["max_concurrent_token"] = max(P.stats["max_concurrent_token"], P.in_flight_token)
        try:
            return self.token_inner(params, dups, grant)
        except OAuthError as e:
            P.count("token_errors", e.error)
            raise
        finally:
            with P.lock:
                P.in_flight_token -= 1

    def token_inner(self, params: dict, dups: list[str], grant: str):
        P = PROVIDER
        v = P.takev("slow_token", grant)
        if v is not None:
            time.sleep(float(v))
        entry = P.take("token_error", grant)
        if entry is not None:
            v = entry["value"]
            if isinstance(v, int) and not isinstance(v, bool):
                P.count("token_errors", str(v))
                return self.send(v, f"<html><body><h1>{v}</h1>token_error behaviour</body></html>".encode(),
                                 "text/html")
            err = "invalid_grant" if v is True else str(v)
            status = entry.get("status") or (401 if err == "invalid_client" else
                                             500 if err == "server_error" else
                                             503 if err == "temporarily_unavailable" else 400)
            raise OAuthError(err, "token_error behaviour", int(status))
        if P.takev("malformed_token_response", grant) is not None:
            return self.send(200, b'{"access_token": "cut off', "application/json")
        if dups:
            raise OAuthError("invalid_request", f"parameters repeated: {sorted(set(dups))}")
        client_id, _ = self.client_auth(params)
        if grant == "authorization_code":
            body = self.grant_code(params, client_id)
        elif grant == "refresh_token":
            if not PROFILES[P.profile]["refresh"]:
                raise OAuthError("unsupported_grant_type", f"{P.profile} issues no refresh tokens")
            body = self.grant_refresh(params, client_id)
        else:
            raise OAuthError("unsupported_grant_type", f"grant_type {grant!r} is not supported")
        v = P.takev("huge_token_response", grant)
        if v is not None:
            size = 10 * 1024 * 1024 if v is True else int(v)
            body["padding"] = "x" * size
        self.send_json(200, body, {"Pragma": "no-cache"})

    def grant_code(self, params: dict, client_id: str) -> dict:
        P = PROVIDER
        with P.lock:
            code = P.codes.get(params.get("code", ""))
            if code is None:
                raise OAuthError("invalid_grant", "unknown authorization code")
            if code["used"]:
                # RFC 6749 4.1.2: a replayed code is refused and its tokens SHOULD be revoked.
                P.stats["code_replays"] += 1
                if code["family"]:
                    P.revoke_family(P.families[code["family"]], "code replay")
                raise OAuthError("invalid_grant", "authorization code already used")
            code["used"] = True  # burnt by the first attempt, even a failed one
            if time.time() > code["exp"]:
                raise OAuthError("invalid_grant", "authorization code expired")
            if code["client_id"] != client_id:
                raise OAuthError("invalid_grant", "code was issued to another client")
            if params.get("redirect_uri") != code["redirect_uri"]:
                raise OAuthError("invalid_grant", "redirect_uri differs from the authorization request")
            verifier = params.get("code_verifier")
            if not verifier:
                raise OAuthError("invalid_request", "code_verifier is missing (PKCE)")
            if not (43 <= len(verifier) <= 128) or not set(verifier) <= PKCE_CHARS:
                raise OAuthError("invalid_grant", "code_verifier is malformed (RFC 7636 4.1)")
            if s256(verifier) != code["challenge"]:
                raise OAuthError("invalid_grant", "PKCE verification failed")
            fam = P.new_family(code)
            code["family"] = fam["id"]
            access = P.issue_access(fam, code["scope"])
            body = {"access_token": access, "token_type": "Bearer",
                    "expires_in": P.config["access_ttl"], "scope": code["scope"]}
            if PROFILES[P.profile]["refresh"]:
                body["refresh_token"] = P.issue_refresh(fam)
                body["refresh_expires_in"] = P.config["refresh_ttl"]
            body["id_token"] = P.mint_id_token(fam, access, code["nonce"], "authorization_code")
            return body

    def grant_refresh(self, params: dict, client_id: str) -> dict:
        P = PROVIDER
        with P.lock:
            rt = P.refresh.get(params.get("refresh_token", ""))
            if rt is None:
                raise OAuthError("invalid_grant", "unknown refresh token")
            fam = P.families[rt["family"]]
            if fam["client_id"] != client_id:
                raise OAuthError("invalid_grant", "refresh token was issued to another client")
            successor = P.refresh.get(rt.get("successor", ""))
            if (rt["state"] == "rotated" and P.config.get("rotation_grace") and not fam["revoked"]
                    and successor is not None and successor["state"] == "active"):
                # Its successor was never used: the client never got it. Supersede it.
                P.stats["refresh_grace_used"] += 1
                successor["state"] = "rotated"
                rt["state"] = "active"
            if rt["state"] == "rotated":
                # Reuse of a rotated refresh token: assume theft, revoke the whole family.
                P.stats["refresh_reuse_detected"] += 1
                P.revoke_family(fam, "refresh token reuse")
                raise OAuthError("invalid_grant", "refresh token reuse detected; family revoked")
            if rt["state"] == "revoked" or fam["revoked"]:
                raise OAuthError("invalid_grant", f"refresh token revoked ({fam['revoked'] or 'revoked'})")
            if time.time() >= rt["exp"]:
                raise OAuthError("invalid_grant", "refresh token expired")
            scope = fam["scope"]
            if "scope" in params:
                asked = params["scope"].split()
                if not set(asked) <= set(scope.split()):
                    raise OAuthError("invalid_scope", "refresh may not widen the scope")
                scope = " ".join(asked)
            access = P.issue_access(fam, scope)
            body = {"access_token": access, "token_type": "Bearer",
                    "expires_in": P.config["access_ttl"], "scope": scope}
            if PROFILES[P.profile]["refresh"] == "rotate":
                P.stats["last_rotation_ns"] = time.monotonic_ns()
                rt["state"] = "rotated"
                body["refresh_token"] = rt["successor"] = P.issue_refresh(fam)
                body["refresh_expires_in"] = P.config["refresh_ttl"]
            if P.config["id_token_on_refresh"] and "openid" in scope.split():
                # OIDC Core 12.2: same iss/sub/aud/auth_time, new iat, no nonce.
                body["id_token"] = P.mint_id_token(fam, access, None, "refresh_token")
            return body

    # --- userinfo ------------------------------------------------------------------------
    def h_userinfo(self, method, url):
        P = PROVIDER
        if method == "POST":
            self.read_body()
        auth = self.headers.get("Authorization", "")
        bearer = auth[7:].strip() if auth.lower().startswith("bearer ") else None
        challenge = 'Bearer realm="strict_provider"'
        if not bearer:
            return self.send_json(401, {"error": "invalid_request"}, {"WWW-Authenticate": challenge})
        with P.lock:
            a = P.access.get(bearer)
            if a is None or a["revoked"] or time.time() >= a["exp"]:
                why = "unknown" if a is None else "revoked" if a["revoked"] else "expired"
                return self.send_json(401, {"error": "invalid_token", "error_description": why},
                                      {"WWW-Authenticate": challenge + ', error="invalid_token"'})
            fam = P.families[a["family"]]
            claims = claims_for(P.profile, fam["user"], P.users.get(fam["user"], {}),
                                set(a["scope"].split()), fam["login_sub"], "userinfo")
        if P.takev("userinfo_sub_mismatch") is not None:
            claims["sub"] = "mismatch-" + secrets.token_hex(8)
        self.send_json(200, claims)

    # --- revocation (RFC 7009) -----------------------------------------------------------
    def h_revoke(self, method, url):
        P = PROVIDER
        if method != "POST":
            return self.send_json(405, {"error": "invalid_request"})
        params, _ = self.single(self.form())
        client_id, _ = self.client_auth(params, record=False)
        token = params.get("token")
        if not token:
            raise OAuthError("invalid_request", "token is missing")
        with P.lock:
            if token in P.refresh:
                fam = P.families[P.refresh[token]["family"]]
                if fam["client_id"] == client_id:
                    P.revoke_family(fam, "revoked by client")  # RFC 7009 2.1: and its access tokens
                P.stats["revocations"]["refresh_token"] += 1
            elif token in P.access:
                a = P.access[token]
                if P.families[a["family"]]["client_id"] == client_id:
                    a["revoked"] = True
                P.stats["revocations"]["access_token"] += 1
            else:
                P.stats["revocations"]["unknown"] += 1
        self.send(200, b"", "text/plain")

    # --- admin ---------------------------------------------------------------------------
    def h_admin(self, method, path):
        P = PROVIDER
        body = None
        if method == "POST":
            raw = self.read_body()
            try:
                body = json.loads(raw) if raw.strip() else {}
            except ValueError:
                return self.send_json(400, {"error": "body is not JSON"})
        try:
            if path == "/_admin/behavior" and method == "GET":
                return self.send_json(200, P.behaviours_view())
            if path == "/_admin/behavior" and method == "POST":
                return self.send_json(200, P.set_behaviours(body))
            if path == "/_admin/stats" and method == "GET":
                with P.lock:
                    P.recorded.wait_for(lambda: P.unrecorded_answers == 0, timeout=2)
                    stats = copy.deepcopy(P.stats)
                    # Recorded as each handler finishes; listed in the order they began.
                    stats["token_calls"].sort(key=lambda c: c["start_ns"])
                    stats["active"] = {
                        "access_tokens": sum(1 for a in P.access.values()
                                             if not a["revoked"] and time.time() < a["exp"]),
                        "refresh_tokens": sum(1 for r in P.refresh.values()
                                              if r["state"] == "active" and time.time() < r["exp"]),
                    }
                return self.send_json(200, stats)
            if path == "/_admin/reset" and method == "POST":
                P.reset()
                return self.send_json(200, {"ok": True})
            if path == "/_admin/rotate-keys" and method == "POST":
                return self.send_json(200, P.rotate_keys(bool(body.get("keep_old", True))))
            if path == "/_admin/users" and method == "GET":
                with P.lock:
                    return self.send_json(200, copy.deepcopy(P.users))
            if path.startswith("/_admin/users/") and method == "POST":
                uid = path[len("/_admin/users/"):]
                if not uid or "/" in uid:
                    return self.send_json(400, {"error": "bad user id"})
                return self.send_json(200, P.update_user(uid, body))
            if path == "/_admin/config" and method == "GET":
                return self.send_json(200, dict(P.config))
            if path == "/_admin/config" and method == "POST":
                return self.send_json(200, P.set_config(body))
            if path == "/_admin/expire-tokens" and method == "POST":
                return self.send_json(200, P.expire_tokens(bool(body.get("access", True)),
                                                           bool(body.get("refresh", False))))
            if path == "/_admin/introspect" and method == "POST":
                return self.send_json(200, P.introspect(str(body.get("token", ""))))
        except AdminError as e:
            return self.send_json(400, {"error": str(e)})
        return self.send_json(404, {"error": f"no admin route {method} {path}"})


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64


# ---------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------


def watchdog(initial_ppid: int, watch_pid: int | None, idle_exit: float):
    """Exit when the parent (or --watch-pid) is gone, or after idle_exit s without requests."""
    while True:
        time.sleep(0.2)
        if os.getppid() != initial_ppid:
            os._exit(0)
        if watch_pid:
            try:
                os.kill(watch_pid, 0)
            except ProcessLookupError:
                os._exit(0)
            except PermissionError:
                pass
        if idle_exit > 0 and time.monotonic() - PROVIDER.last_activity > idle_exit:
            os._exit(0)


def main(argv=None):
    global PROVIDER
    ap = argparse.ArgumentParser(description="Strict, controllable OIDC provider for tests.")
    ap.add_argument("--profile", choices=sorted(PROFILES), default="generic")
    ap.add_argument("--port", type=int, default=0, help="0 = ephemeral (default)")
    ap.add_argument("--client-id", default="sessionvault-test")
    ap.add_argument("--client-secret", default=None,
                    help="makes the client confidential (client_secret_basic or _post)")
    ap.add_argument("--client-auth", action="append",
                    choices=["client_secret_basic", "client_secret_post", "private_key_jwt"],
                    help="allowed client auth methods when a secret or key is set (repeatable; "
                         "default both secret methods, or private_key_jwt with only a key)")
    ap.add_argument("--client-public-key", default=None,
                    help="a PEM file with the client's public key: makes it confidential (private_key_jwt)")
    ap.add_argument("--redirect-uri", action="append", default=[],
                    help="registered redirect URI, exact match (repeatable); default any loopback")
    ap.add_argument("--access-ttl", type=int, default=300)
    ap.add_argument("--refresh-ttl", type=int, default=86400)
    ap.add_argument("--id-token-ttl", type=int, default=300)
    ap.add_argument("--code-ttl", type=int, default=60)
    ap.add_argument("--no-iss-parameter", action="store_true",
                    help="advertise authorization_response_iss_parameter_supported=false and send no iss")
    ap.add_argument("--idle-exit", type=float, default=600, help="seconds without requests; 0 = never")
    ap.add_argument("--watch-pid", type=int, default=None, help="also exit when this pid is gone")
    ap.add_argument("--verbose", action="store_true", help="log requests to stderr")
    ap.add_argument("--issued-log", default=None,
                    help="append every token, code and national ID number handed out to this file")
    args = ap.parse_args(argv)
    global ISSUED_LOG
    ISSUED_LOG = args.issued_log
    for user in default_users().values():
        note_issued("nin", user["nin"])

    config = {
        "client_id": args.client_id,
        "client_secret": args.client_secret,
        "client_auth_methods": args.client_auth or (
            ["client_secret_basic", "client_secret_post"] if args.client_secret or not args.client_public_key
            else ["private_key_jwt"]),
        "client_public_key": (open(args.client_public_key, encoding="ascii").read()
                              if args.client_public_key else None),
        "redirect_uris": list(args.redirect_uri),
        "access_ttl": args.access_ttl, "refresh_ttl": args.refresh_ttl,
        "id_token_ttl": args.id_token_ttl, "code_ttl": args.code_ttl,
        "iss_parameter_supported": not args.no_iss_parameter,
        "require_nonce": True,
        "id_token_on_refresh": True,
        "rotation_grace": False,
    }
    PROVIDER = Provider(args.profile, config)
    server = Server(("127.0.0.1", args.port), Handler)
    server.verbose = args.verbose
    server.profile = args.profile
    port = server.server_address[1]
    PROVIDER.issuer = f"http://127.0.0.1:{port}"
    threading.Thread(target=watchdog, args=(os.getppid(), args.watch_pid, args.idle_exit),
                     daemon=True).start()
    # The socket is listening already (bound in the constructor): connections queue up.
    print(f"READY {PROVIDER.issuer}", flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
