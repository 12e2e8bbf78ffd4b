#!/usr/bin/env python3
"""The organization's backend for SessionVault (issue 25): a reference implementation.

docs/backend.md is the contract; this file implements it. vaultd runs a BankID or Vipps
login as a public client and posts the code here. The backend redeems it at the provider
(the *upstream*) with the organization's credentials, verifies the ID token, applies its
own rules (age >= 18 from the national ID, the member records: seed 002's login flow)
and hands out its own session: an opaque access token and a rotating refresh token,
stored only as SHA-256 hashes.

    python backend.py --upstream NAME=ISSUER,CLIENT_ID,CLIENT_SECRET [--upstream ...]
        [--port 0] [--db PATH] [--access-ttl 900] [--rotation-grace 0] [--session-days 7] [--rate-limit 60]
        [--require-members FILE] [--watch-pid PID] [--idle-exit SECONDS] [--no-admin]
        [--issued-log FILE]   (tests: every token handed out, for the secrets scan)

CLIENT_SECRET may be `env:VAR`, read from the environment (every local user can read a
command line), or `private_key_jwt:PEMFILE`: the backend then authenticates at the
upstream with a JWT signed by that private key (RFC 7523, OIDC Core 9; what BankID
recommends), registered with the upstream by its public key. The file must be readable
by its owner only. It binds 127.0.0.1 (a TLS proxy goes in front: the contract is HTTPS only),
prints one line `READY http://127.0.0.1:PORT` once it accepts connections, and exits when
its parent or --watch-pid dies, or after --idle-exit seconds without requests.

Endpoints, per upstream NAME: POST /NAME/token (a code, a refresh, or an RFC 8693 exchange of
an ID token), POST /NAME/revoke; shared: GET /me. For
tests, /_admin/ (loopback only, never through a proxy; --no-admin removes it) moves the
clock, lists the sessions and counters, and plays an outage.

Why Flask: a well-kept PyPI framework that is already pinned in the test venv
(scripts/provider-venv), so the reference adds no dependency, and a reader who knows
Express or Django reads it at once. ID tokens are verified with PyJWT (also pinned), which
binds the algorithm to the key rather than to the token's header; httpx talks to the
upstream with timeouts; `cryptography` (PyJWT's own dependency for RS256/ES256) reads
the private_key_jwt key. Everything else is the standard library (sqlite3, secrets).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import json
import os
import re
import secrets
import signal
import sqlite3
import sys
import tempfile
import threading
import time
import traceback
from datetime import date, datetime, timezone
from urllib.parse import quote_plus, urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import httpx
import jwt  # PyJWT
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from flask import Flask, jsonify, request
from werkzeug.exceptions import HTTPException
from werkzeug.serving import WSGIRequestHandler, make_server

LEEWAY = 60               # seconds of clock skew allowed on the upstream's exp / iat
ID_TOKEN_MAX_AGE = 600    # an ID token from a code exchange was minted just now
# RFC 8693's names (docs/backend.md section 6).
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id_token"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
REFRESH_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:refresh_token"
EXCHANGE_MAX_AGE = 300   # seconds since the ID token was issued
ASYMMETRIC_ALGS = {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512"}


class OAuthError(Exception):
    """An RFC 6749 section 5.2 error answer."""

    def __init__(self, error: str, description: str = "", status: int = 400,
                 headers: dict | None = None):
        super().__init__(error)
        self.error, self.description, self.status = error, description, status
        self.headers = headers or {}


def unavailable(why: str) -> OAuthError:
    """The upstream is down, unreachable or answered nonsense: vaultd keeps the session and
    says the provider is unavailable (docs/backend.md section 5)."""
    return OAuthError("temporarily_unavailable", why, 502)


def sha256_hex(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


# --- The Norwegian national ID number: birth date and age. The number itself is never kept.

def birthdate_from_nin(nin: str) -> date:
    """The birth date in an 11-digit fødselsnummer (DDMMYY III KK), or ValueError.

    D-numbers add 40 to the day; H-numbers (and NAV's test numbers) add 40 to the month,
    Skatteetaten's synthetic test numbers add 80. A production backend should refuse
    synthetic numbers: real providers never issue them. The century comes from the
    individual number III (Skatteetaten's rules).
    """
    if len(nin) != 11 or not nin.isascii() or not nin.isdigit():
        raise ValueError("not 11 digits")
    d = [int(c) for c in nin]
    k1 = (11 - sum(w * x for w, x in zip((3, 7, 6, 1, 8, 9, 4, 5, 2), d)) % 11) % 11
    k2 = (11 - sum(w * x for w, x in zip((5, 4, 3, 2, 7, 6, 5, 4, 3, 2), d)) % 11) % 11
    if (k1, k2) != (d[9], d[10]):   # a remainder giving 10 never matches one digit
        raise ValueError("check digits")
    day, month, yy, ind = int(nin[0:2]), int(nin[2:4]), int(nin[4:6]), int(nin[6:9])
    day -= 40 if day > 40 else 0                               # D-number
    month -= 80 if month > 80 else 40 if month > 40 else 0     # synthetic / H-number
    if ind <= 499:
        century = 1900
    elif ind <= 749 and yy >= 54:
        century = 1800
    elif yy <= 39:
        century = 2000
    elif ind >= 900:
        century = 1900
    else:
        raise ValueError("individual number does not fit the year")
    return date(century + yy, month, day)   # ValueError for a day that does not exist


def age(born: date, now: int) -> int:
    """Full years on today's date in Norway. Someone born on 29 February turns a year
    older on 1 March in other years."""
    try:
        today = datetime.fromtimestamp(now, ZoneInfo("Europe/Oslo")).date()
    except ZoneInfoNotFoundError:   # no tz database: UTC is at most a day off
        today = datetime.fromtimestamp(now, timezone.utc).date()
    return today.year - born.year - ((today.month, today.day) < (born.month, born.day))


# --- Storage: SQLite. Tokens are stored by their SHA-256 only, so a copy of the database
# (a backup, a stolen disk) gives nobody a usable token; no national ID is stored at all.

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id             TEXT PRIMARY KEY,     -- one per login; its refresh tokens are a family
    provider       TEXT NOT NULL,        -- the upstream's NAME
    subject        TEXT NOT NULL,        -- the upstream's stable subject
    name           TEXT,
    checks         TEXT NOT NULL,        -- the rules passed ("age>=18", "member"); never the ID
    created_at     INTEGER NOT NULL,     -- times: seconds since the epoch
    expires_at     INTEGER NOT NULL,     -- absolute end: no refresh goes past it
    revoked_at     INTEGER,
    revoked_reason TEXT
);
CREATE TABLE IF NOT EXISTS tokens (
    hash       TEXT PRIMARY KEY,         -- SHA-256 hex of the token, never the token
    kind       TEXT NOT NULL CHECK (kind IN ('access', 'refresh')),
    session_id TEXT NOT NULL REFERENCES sessions(id),
    client_id  TEXT NOT NULL,            -- a refresh token works only for its own client
    issued_at  INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    used_at    INTEGER,                    -- a refresh token's rotation; a second use is theft
    replaced_by TEXT                       -- the hash of the refresh token its rotation gave
);
CREATE INDEX IF NOT EXISTS tokens_by_session ON tokens(session_id);
"""


class Store:
    """All database work. One connection behind one lock: a rotation (read, mark used,
    issue the successor) is then atomic, and SQLite serializes writers anyway."""

    def __init__(self, path: str, access_ttl: int, rotation_grace: int = 0):
        self.db = sqlite3.connect(path, check_same_thread=False)
        self.db.row_factory = sqlite3.Row
        self.db.executescript(SCHEMA)
        self.lock = threading.Lock()
        self.access_ttl = access_ttl
        self.rotation_grace = rotation_grace

    def _grant(self, session_id: str, client_id: str, now: int, session_end: int) -> dict:
        """A new access token and refresh token for the session; neither outlives it."""
        access, refresh = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        access_end = min(now + self.access_ttl, session_end)
        self.db.executemany(
            "INSERT INTO tokens (hash, kind, session_id, client_id, issued_at, expires_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            [(sha256_hex(access), "access", session_id, client_id, now, access_end),
             (sha256_hex(refresh), "refresh", session_id, client_id, now, session_end)])
        return {"access_token": access, "token_type": "Bearer",
                "expires_in": access_end - now, "refresh_token": refresh,
                "refresh_expires_in": session_end - now}

    def create_session(self, provider, subject, name, checks, client_id, now, days) -> dict:
        with self.lock, self.db:   # one transaction
            sid = secrets.token_hex(16)
            end = now + int(days * 86400)
            self.db.execute(
                "INSERT INTO sessions (id, provider, subject, name, checks, created_at, expires_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)", (sid, provider, subject, name, checks, now, end))
            return self._grant(sid, client_id, now, end)

    def rotate(self, provider: str, refresh_token: str, client_id: str, now: int):
        """(new grant, None) or (None, why the refresh token is dead)."""
        with self.lock:
            row = self.db.execute(
                "SELECT t.*, s.provider, s.expires_at AS session_end, s.revoked_at"
                " FROM tokens t JOIN sessions s ON s.id = t.session_id"
                " WHERE t.hash = ? AND t.kind = 'refresh'", (sha256_hex(refresh_token),)).fetchone()
            if row is None or row["provider"] != provider or row["client_id"] != client_id:
                return None, "unknown"
            if row["used_at"] is not None and not self._overlap(row, now):
                # RFC 9700 4.14: a rotated-away token came back, so a copy exists somewhere.
                # End the whole family: the thief's and the owner's tokens alike.
                with self.db:
                    self._revoke(row["session_id"], now, "reused")
                return None, "reused"
            if row["revoked_at"] is not None:
                return None, "revoked"
            if now >= row["expires_at"] or now >= row["session_end"]:
                return None, "expired"
            with self.db:
                if row["replaced_by"] is not None:
                    # The overlap: the successor nobody used dies, so a later use of it is reuse.
                    self.db.execute("UPDATE tokens SET used_at = ? WHERE hash = ?", (now, row["replaced_by"]))
                grant = self._grant(row["session_id"], client_id, now, row["session_end"])
                self.db.execute("UPDATE tokens SET used_at = COALESCE(used_at, ?), replaced_by = ? WHERE hash = ?",
                                (now, sha256_hex(grant["refresh_token"]), row["hash"]))
                return grant, None

    def _overlap(self, row, now: int) -> bool:
        """--rotation-grace (Auth0's and Okta's overlap): the previous refresh token may be
        used again for a short while, as long as its successor was never used. vaultd
        stores a rotated token before it uses it, but a vaultd killed after this backend
        rotated and before the answer arrived never saw the successor: without the overlap
        that person's session would end as if the token had been stolen. Any use of a token
        older than that, or of one whose successor was used, is still reuse."""
        if self.rotation_grace <= 0 or now - row["used_at"] > self.rotation_grace or row["replaced_by"] is None:
            return False
        successor = self.db.execute("SELECT used_at FROM tokens WHERE hash = ?", (row["replaced_by"],)).fetchone()
        return successor is not None and successor["used_at"] is None

    def _revoke(self, session_id: str, now: int, reason: str) -> None:
        # The first reason stays: a session revoked at logout and then hit by a reused
        # token was still ended by the logout.
        self.db.execute("UPDATE sessions SET revoked_at = ?, revoked_reason = ?"
                        " WHERE id = ? AND revoked_at IS NULL", (now, reason, session_id))

    def revoke_token(self, provider: str, token: str, client_id: str, now: int) -> bool:
        """RFC 7009: either kind of token ends its session. True if it was one of ours."""
        with self.lock:
            row = self.db.execute(
                "SELECT t.session_id, t.client_id, s.provider FROM tokens t"
                " JOIN sessions s ON s.id = t.session_id WHERE t.hash = ?",
                (sha256_hex(token),)).fetchone()
            # Another client's or another upstream's token is treated as unknown.
            if row is None or row["provider"] != provider or row["client_id"] != client_id:
                return False
            with self.db:
                self._revoke(row["session_id"], now, "logout")
            return True

    def session_for_access(self, token: str, now: int):
        with self.lock:
            return self.db.execute(
                "SELECT s.* FROM tokens t JOIN sessions s ON s.id = t.session_id"
                " WHERE t.hash = ? AND t.kind = 'access' AND t.expires_at > ?"
                " AND s.revoked_at IS NULL AND s.expires_at > ?",
                (sha256_hex(token), now, now)).fetchone()

    def sessions(self, now: int) -> list[dict]:
        with self.lock:
            rows = self.db.execute(
                "SELECT s.id, s.provider, s.subject, s.created_at, s.expires_at, s.revoked_at,"
                " s.revoked_reason, (SELECT COUNT(*) FROM tokens t WHERE t.session_id = s.id"
                "   AND t.kind = 'refresh' AND t.used_at IS NULL AND t.expires_at > ?"
                "   AND s.revoked_at IS NULL) AS live_refresh_tokens"
                " FROM sessions s ORDER BY s.created_at", (now,)).fetchall()
            return [dict(r) for r in rows]


# --- The upstream OpenID Provider

class Upstream:
    """One OpenID Provider at which the organization registered a confidential client."""

    def __init__(self, name: str, issuer: str, client_id: str, client_secret: str,
                 http: httpx.Client, private_key=None):
        self.name, self.issuer, self.client_id = name, issuer, client_id
        self.secret, self.http = client_secret, http
        # private_key_jwt: the key's algorithm is fixed by its type (never by a header).
        self.private_key = private_key
        self.assertion_alg = None if private_key is None else (
            "ES256" if isinstance(private_key, ec.EllipticCurvePrivateKey) else "RS256")
        self._meta: dict | None = None
        self._jwks: list[dict] = []
        self.lock = threading.Lock()

    def _call(self, method: str, url: str, **kw) -> tuple[int, dict | None]:
        """(HTTP status, the JSON object answered or None)."""
        try:
            r = self.http.request(method, url, **kw)
        except httpx.HTTPError as e:
            raise unavailable(f"{self.name}: {type(e).__name__}") from None
        if r.status_code >= 500 or r.status_code == 429:
            raise unavailable(f"{self.name}: HTTP {r.status_code}")
        try:
            body = r.json()
        except ValueError:
            body = None
        return r.status_code, body if isinstance(body, dict) else None

    def metadata(self) -> dict:
        """Discovery, fetched on first use (the backend starts even while the upstream is
        down) and kept; a failure is not kept, so the next login tries again."""
        with self.lock:
            if self._meta is None:
                status, meta = self._call(
                    "GET", self.issuer.rstrip("/") + "/.well-known/openid-configuration")
                # OIDC Discovery 4.3: the document must name exactly this issuer (mix-up).
                if status != 200 or not meta or meta.get("issuer") != self.issuer \
                        or "token_endpoint" not in meta or "jwks_uri" not in meta:
                    raise unavailable(f"{self.name}: discovery document unusable")
                self._meta = meta
            return self._meta

    def signing_key(self, header: dict) -> dict:
        """The JWK for a token header; the JWKS is fetched again when the kid is unknown
        (the upstream rotated its keys)."""
        def pick(keys):
            kid, kty = header.get("kid"), "EC" if header["alg"].startswith("ES") else "RSA"
            fits = [k for k in keys if k.get("kty") == kty and k.get("use", "sig") == "sig"
                    and k.get("alg", header["alg"]) == header["alg"]]
            if kid is not None:
                return next((k for k in fits if k.get("kid") == kid), None)
            return fits[0] if len(fits) == 1 else None   # no kid: only an unambiguous key

        key = pick(self._jwks)
        if key is None:
            status, body = self._call("GET", self.metadata()["jwks_uri"])
            keys = (body or {}).get("keys") if status == 200 else None
            if not isinstance(keys, list):
                raise unavailable(f"{self.name}: JWKS unusable")
            self._jwks = [k for k in keys if isinstance(k, dict)]
            key = pick(self._jwks)
        if key is None:
            raise OAuthError("invalid_grant", "id_token: signing key not in the upstream's JWKS")
        return key

    # --- the login ---------------------------------------------------------------------
    def client_authentication(self, token_endpoint: str) -> tuple[dict, dict]:
        """(form fields, headers) that authenticate the organization at the upstream:
        a fresh private_key_jwt assertion (one minute, its own jti, for this token
        endpoint only), or client_secret_basic (RFC 6749 2.3.1 form-encodes both halves
        before base64)."""
        if self.private_key is not None:
            now = int(time.time())
            assertion = jwt.encode({"iss": self.client_id, "sub": self.client_id, "aud": token_endpoint,
                                    "iat": now, "exp": now + 60, "jti": secrets.token_urlsafe(24)},
                                   self.private_key, algorithm=self.assertion_alg)
            return ({"client_id": self.client_id,
                     "client_assertion_type": "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
                     "client_assertion": assertion}, {})
        basic = base64.b64encode(
            f"{quote_plus(self.client_id)}:{quote_plus(self.secret)}".encode()).decode()
        return {}, {"Authorization": f"Basic {basic}"}

    def exchange(self, code: str, redirect_uri: str, verifier: str) -> dict:
        """Redeems vaultd's code with the organization's credentials."""
        endpoint = self.metadata()["token_endpoint"]
        fields, headers = self.client_authentication(endpoint)
        status, body = self._call(
            "POST", endpoint,
            data={"grant_type": "authorization_code", "code": code,
                  "redirect_uri": redirect_uri, "code_verifier": verifier, **fields},
            headers={**headers, "Accept": "application/json"})
        if status == 200 and body is not None:
            return body
        error = (body or {}).get("error")
        if error in ("invalid_grant", "invalid_request"):
            # The code (or its verifier / redirect_uri) is what vaultd sent: its error.
            raise OAuthError("invalid_grant", f"upstream: {error}")
        # invalid_client and the like: the organization's registration is wrong. Not
        # vaultd's fault, and nothing it can fix by retrying the login differently.
        raise unavailable(f"{self.name}: token endpoint answered {status} {error or 'without JSON'}")

    def verify_id_token(self, id_token: str) -> dict:
        """OIDC Core 3.1.3.7, except the nonce (vaultd made it and checks it). exp and iat
        are the upstream's times, so they are checked on the real clock, not the test clock
        (a test that moves the backend's days on can still log in afterwards)."""
        def bad(why: str):
            return OAuthError("invalid_grant", f"id_token: {why}")
        try:
            header = jwt.get_unverified_header(id_token)
        except jwt.PyJWTError:
            raise bad("malformed") from None
        alg = header.get("alg")
        allowed = set(self.metadata().get("id_token_signing_alg_values_supported", ["RS256"]))
        if alg not in ASYMMETRIC_ALGS & allowed:   # never none, never HS* with a public key
            raise bad(f"alg {alg!r} not allowed")
        jwk = self.signing_key(header)
        try:
            claims = jwt.decode(id_token, key=jwt.PyJWK(jwk, algorithm=alg), algorithms=[alg],
                                audience=self.client_id, issuer=self.issuer, leeway=LEEWAY,
                                options={"require": ["iss", "sub", "aud", "exp", "iat"]})
        except (jwt.PyJWTError, ValueError) as e:
            raise bad(type(e).__name__) from None
        # Our client id must be the only audience: a token also meant for another client
        # could have been handed to it, so it would prove nothing about this login.
        auds = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
        if any(a != self.client_id for a in auds) or claims.get("azp", self.client_id) != self.client_id:
            raise bad("aud/azp")
        if claims["iat"] < time.time() - ID_TOKEN_MAX_AGE or not claims["sub"]:
            raise bad("iat/sub")
        return claims

    def identify(self, claims: dict, access_token) -> tuple[str, str | None, str | None]:
        """(stable subject, name, national ID) from the verified ID token and, when it
        lacks them, userinfo. BankID puts `nnin_altsub` and the name in the ID token;
        Vipps gives `nin` and the name only from userinfo."""
        def national_id(c: dict):
            return c.get("nnin_altsub") or c.get("nin")
        # BankID's `sub` is new on every login; `bankid_altsub` names the person.
        subject = claims.get("bankid_altsub") or claims["sub"]
        person = dict(claims)
        if (not national_id(claims) or "name" not in claims) and access_token \
                and self.metadata().get("userinfo_endpoint"):
            status, info = self._call("GET", self.metadata()["userinfo_endpoint"],
                                      headers={"Authorization": f"Bearer {access_token}"})
            if status != 200 or info is None:
                raise OAuthError("invalid_grant", f"upstream userinfo: HTTP {status}")
            if info.get("sub") != claims["sub"]:   # OIDC Core 5.3.2: else it is someone else
                raise OAuthError("invalid_grant", "upstream userinfo: sub differs")
            person = {**info, **claims}             # the signed claims win
        nin, name = national_id(person), person.get("name")
        return subject, name if isinstance(name, str) else None, nin if isinstance(nin, str) else None


# --- The backend: the rules, the counters, the rate limit

class RateLimiter:
    """A token bucket per client address: a burst of `per_minute`, refilled evenly.
    It runs on real time, not the test clock: it guards against real bursts."""

    def __init__(self, per_minute: int):
        self.capacity, self.rate = float(per_minute), per_minute / 60.0
        self.buckets: dict[str, tuple[float, float]] = {}
        self.lock = threading.Lock()

    def wait(self, addr: str) -> float:
        """0 if the request may go ahead, else the seconds until it may."""
        now = time.monotonic()
        with self.lock:
            if len(self.buckets) > 10_000:   # forget addresses whose buckets are full again
                self.buckets = {a: b for a, b in self.buckets.items()
                                if b[0] + (now - b[1]) * self.rate < self.capacity}
            tokens, last = self.buckets.get(addr, (self.capacity, now))
            tokens = min(self.capacity, tokens + (now - last) * self.rate)
            if tokens < 1:
                self.buckets[addr] = (tokens, now)
                return (1 - tokens) / self.rate
            self.buckets[addr] = (tokens - 1, now)
            return 0.0


class Backend:
    def __init__(self, args, upstreams: dict[str, Upstream], members: set[str] | None):
        self.upstreams, self.members = upstreams, members
        self.access_ttl, self.session_days = args.access_ttl, args.session_days
        self.admin, self.issued_log = not args.no_admin, args.issued_log
        self.offset = 0   # the test clock: sessions last days; tests move time on instead
        self.store = Store(args.db, args.access_ttl, args.rotation_grace)
        self.limiter = RateLimiter(args.rate_limit)
        self.down = False
        self.slow_refresh: dict[str, float] = {}   # tests: {"before": s, "after": s}
        self.exchanged: dict[str, float] = {}      # RFC 8693: spent ID tokens' SHA-256 -> exp
        self.last_request = time.monotonic()
        self.stats_lock = threading.Lock()
        self.stats = {"logins": 0, "refreshes": 0, "reuse_detected": 0, "revocations": 0,
                      "refusals": {}, "by_status": {}}

    def now(self) -> int:
        """Every time the backend uses, in whole seconds since the epoch."""
        return int(time.time()) + self.offset

    def note_issued(self, grant: dict) -> dict:
        """--issued-log: appends each token handed out, for the test suite's secrets scan
        (which then looks for them in every log and file). Never set in production."""
        if self.issued_log:
            with open(self.issued_log, "a", encoding="utf-8") as f:
                f.write(f"token\t{grant['access_token']}\ntoken\t{grant['refresh_token']}\n")
        return grant

    def count(self, key: str, sub: str | None = None) -> None:
        with self.stats_lock:
            if sub is None:
                self.stats[key] += 1
            else:
                self.stats[key][sub] = self.stats[key].get(sub, 0) + 1

    def check_person(self, nin: str | None, now: int) -> str:
        """The organization's rules; a refusal is access_denied with a description vaultd
        turns into a sentence (docs/backend.md section 5). The ID is forgotten after this."""
        def refuse(why: str):
            self.count("refusals", why)
            return OAuthError("access_denied", why)
        if not nin:
            raise refuse("national_id")          # no ID, no age check: refuse
        try:
            born = birthdate_from_nin(nin)
        except ValueError:
            raise refuse("national_id") from None
        if age(born, now) < 18:
            raise refuse("age")
        if self.members is None:
            return "age>=18"
        if nin not in self.members:
            raise refuse("not_member")
        return "age>=18,member"

    def login(self, up: Upstream, form: dict) -> dict:
        code, redirect_uri, verifier = required(form, "code", "redirect_uri", "code_verifier")
        answer = up.exchange(code, redirect_uri, verifier)
        id_token = answer.get("id_token")
        if not isinstance(id_token, str):
            raise unavailable(f"{up.name}: token response without id_token")
        now = self.now()
        claims = up.verify_id_token(id_token)
        subject, name, nin = up.identify(claims, answer.get("access_token"))
        checks = self.check_person(nin, now)
        grant = self.store.create_session(up.name, subject, name, checks, form["client_id"],
                                          now, self.session_days)
        self.count("logins")
        # The upstream's ID token, unchanged: vaultd checks its nonce and signature itself.
        # The upstream's access token is dropped here; it never leaves this function.
        return {**self.note_issued(grant), "id_token": id_token}

    def exchange(self, up: Upstream, form: dict) -> dict:
        """RFC 8693 token exchange (docs/backend.md section 6): the provider's ID token
        instead of the code, for a setup where something else holding the organization's
        credentials redeemed the code. An ID token is a bearer assertion, so this is the
        weaker way in: it must have been issued in the last EXCHANGE_MAX_AGE seconds, each
        one makes one session only, and the national ID must be in the ID token itself
        (there is no access token for userinfo; Vipps puts `nin` only there, so a Vipps
        ID token is refused here with `national_id`)."""
        token, token_type = required(form, "subject_token", "subject_token_type")
        if token_type != ID_TOKEN_TYPE:
            raise OAuthError("invalid_request", "subject_token_type must be " + ID_TOKEN_TYPE)
        if form.get("requested_token_type", REFRESH_TOKEN_TYPE) not in (REFRESH_TOKEN_TYPE, ACCESS_TOKEN_TYPE):
            raise OAuthError("invalid_request", "requested_token_type: only a session (refresh or access token)")
        claims = up.verify_id_token(token)
        if claims["iat"] < time.time() - EXCHANGE_MAX_AGE:
            raise OAuthError("invalid_grant", "id_token: too old to exchange")
        # Spent by its hash until it expires (in memory: a restart forgets, but the
        # ID token's own short life still bounds a replay).
        digest = hashlib.sha256(token.encode()).hexdigest()
        with self.stats_lock:
            now_real = time.time()
            self.exchanged = {h: e for h, e in self.exchanged.items() if e > now_real}
            if digest in self.exchanged:
                raise OAuthError("invalid_grant", "id_token: already exchanged")
            self.exchanged[digest] = float(claims["exp"])
        subject, name, nin = up.identify(claims, None)
        checks = self.check_person(nin, self.now())
        grant = self.store.create_session(up.name, subject, name, checks, form["client_id"],
                                          self.now(), self.session_days)
        self.count("logins")
        return {**self.note_issued(grant), "issued_token_type": ACCESS_TOKEN_TYPE}

    def refresh(self, up: Upstream, form: dict) -> dict:
        (token,) = required(form, "refresh_token")
        time.sleep(self.slow_refresh.get("before", 0))   # tests: a request in flight
        # The upstream is not asked: the session's limit is ours (Vipps has no refresh).
        grant, why = self.store.rotate(up.name, token, form["client_id"], self.now())
        time.sleep(self.slow_refresh.get("after", 0))    # tests: rotated, not yet answered
        if why == "reused":
            self.count("reuse_detected")
        if grant is None:
            raise OAuthError("invalid_grant", why)
        self.count("refreshes")
        return self.note_issued(grant)


def required(form: dict, *names: str) -> list[str]:
    missing = [n for n in names if not form.get(n)]
    if missing:
        raise OAuthError("invalid_request", f"missing {', '.join(missing)}")
    return [form[n] for n in names]


# --- HTTP

def create_app(b: Backend) -> Flask:
    app = Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = 64 * 1024

    def upstream(name: str) -> Upstream:
        up = b.upstreams.get(name)
        if up is None:
            raise OAuthError("not_found", "no such upstream", 404)
        return up

    def oauth_form(up: Upstream) -> dict:
        """The form of a token or revocation request, after the checks every one needs."""
        if b.down:
            raise OAuthError("temporarily_unavailable", "down (test switch)", 503)
        wait = b.limiter.wait(request.remote_addr or "?")
        if wait:
            raise OAuthError("temporarily_unavailable", "rate limited", 429,
                             {"Retry-After": str(max(1, round(wait + 0.5)))})
        if request.mimetype != "application/x-www-form-urlencoded":
            raise OAuthError("invalid_request", "body must be application/x-www-form-urlencoded")
        if any(len(v) > 1 for v in request.form.listvalues()):
            raise OAuthError("invalid_request", "a parameter is repeated")   # RFC 6749 3.2
        form = request.form.to_dict()
        # vaultd is a public client: its client_id only names it, and must be the one the
        # organization registered at this upstream.
        if form.get("client_id") != up.client_id:
            raise OAuthError("invalid_client", "unknown client_id", 401)
        return form

    @app.post("/<name>/token")
    def token(name):
        up = upstream(name)
        form = oauth_form(up)
        grant = form.get("grant_type")
        if grant == "authorization_code":
            body = b.login(up, form)
        elif grant == "refresh_token":
            body = b.refresh(up, form)
        elif grant == TOKEN_EXCHANGE:
            body = b.exchange(up, form)
        elif not grant:
            raise OAuthError("invalid_request", "missing grant_type")
        else:
            raise OAuthError("unsupported_grant_type", "")
        return jsonify(body)

    @app.post("/<name>/revoke")
    def revoke(name):
        up = upstream(name)
        form = oauth_form(up)
        (token,) = required(form, "token")
        # token_type_hint is only a hint (RFC 7009 2.1): one lookup finds either kind.
        if b.store.revoke_token(up.name, token, up.client_id, b.now()):
            b.count("revocations")
        return "", 200   # known or not (RFC 7009 2.2)

    @app.get("/me")
    def me():
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return jsonify(error="invalid_request"), 401, {"WWW-Authenticate": "Bearer"}
        row = b.store.session_for_access(token.strip(), b.now())
        if row is None:
            return (jsonify(error="invalid_token"), 401,
                    {"WWW-Authenticate": 'Bearer error="invalid_token"'})
        return jsonify(sub=row["subject"], name=row["name"], provider=row["provider"],
                       session_expires_at=int(row["expires_at"]))

    # --- test controls: loopback only, and not through a proxy (--no-admin: none) -------
    @app.route("/_admin/<what>", methods=["GET", "POST"])
    def admin(what):
        proxied = "Forwarded" in request.headers or "X-Forwarded-For" in request.headers
        if not b.admin or proxied or request.remote_addr not in ("127.0.0.1", "::1"):
            raise OAuthError("not_found", "", 404)
        body = (request.get_json(force=True, silent=True) or {}) if request.method == "POST" else {}
        if (what, request.method) == ("clock", "POST"):   # {"advance": s} or {"offset": s}
            b.offset = int(body.get("offset", b.offset)) + int(body.get("advance", 0))
            return jsonify(offset=b.offset, now=b.now())
        if (what, request.method) == ("sessions", "GET"):
            return jsonify(sessions=b.store.sessions(b.now()))
        if (what, request.method) == ("stats", "GET"):
            with b.stats_lock:
                return jsonify(json.loads(json.dumps(b.stats)))
        if (what, request.method) == ("behavior", "POST"):
            b.down = bool(body.get("down", b.down))
            if "slow_refresh" in body:   # {"before": s, "after": s}: hold a refresh there
                b.slow_refresh = {k: float(v) for k, v in (body["slow_refresh"] or {}).items()}
            return jsonify(down=b.down, slow_refresh=b.slow_refresh)
        raise OAuthError("not_found", "", 404)

    # --- answers -------------------------------------------------------------------------
    @app.errorhandler(OAuthError)
    def oauth_error(e: OAuthError):
        if e.status == 502:   # for the organization's IT: names and statuses, no values
            sys.stderr.write(f"upstream unavailable: {e.description}\n")
        return jsonify(error=e.error, error_description=e.description), e.status, e.headers

    @app.errorhandler(HTTPException)
    def http_error(e: HTTPException):
        error = "invalid_request" if e.code in (400, 405, 413) else "not_found"
        return jsonify(error=error), e.code

    @app.errorhandler(Exception)
    def internal(e: Exception):
        # The stack without the message: a message could quote a value from the request.
        sys.stderr.write(f"internal error: {type(e).__name__}\n")
        traceback.print_tb(e.__traceback__)
        return jsonify(error="server_error"), 500

    @app.after_request
    def no_store(resp):
        b.last_request = time.monotonic()   # for --idle-exit
        resp.headers["Cache-Control"] = "no-store"   # every answer may carry a token
        resp.headers["Pragma"] = "no-cache"
        if not request.path.startswith("/_admin/"):
            b.count("by_status", str(resp.status_code))
        return resp

    return app


class LogHandler(WSGIRequestHandler):
    """One line per request on stderr: method, path, status. Werkzeug's own line has the
    query string, and its error lines quote the raw request line: either may hold a secret."""

    def log_request(self, code="-", size="-"):
        path = urlsplit(getattr(self, "path", "") or "").path[:200]
        sys.stderr.write(f"{getattr(self, 'command', None) or '-'} {path} {code}\n")

    def log_error(self, format, *args):   # noqa: A002 -- the status is in log_request's line
        pass


# --- Main

def parse_upstream(spec: str, http: httpx.Client) -> Upstream:
    name, _, rest = spec.partition("=")
    parts = rest.split(",", 2)   # the secret may itself contain commas
    if not re.fullmatch(r"[a-z0-9][a-z0-9_-]*", name) or name == "me" or len(parts) != 3:
        raise SystemExit(f"--upstream: expected NAME=ISSUER,CLIENT_ID,CLIENT_SECRET (got name {name!r})")
    issuer, client_id, secret = parts
    private_key = None
    if secret.startswith("env:"):
        secret = os.environ.get(secret[4:]) or ""
    elif secret.startswith("private_key_jwt:"):
        path = secret[len("private_key_jwt:"):]
        try:
            if os.stat(path).st_mode & 0o077:
                raise SystemExit(f"--upstream {name}: {path} is readable by others; chmod 600 it")
            with open(path, "rb") as f:
                private_key = serialization.load_pem_private_key(f.read(), password=None)
        except (OSError, ValueError, TypeError) as e:
            raise SystemExit(f"--upstream {name}: cannot use the key in {path}: {type(e).__name__}") from None
        if not (isinstance(private_key, rsa.RSAPrivateKey) or (
                isinstance(private_key, ec.EllipticCurvePrivateKey) and private_key.curve.name == "secp256r1")):
            raise SystemExit(f"--upstream {name}: the key must be RSA or EC P-256")
        secret = "private_key_jwt"
    u = urlsplit(issuer)
    if not (u.scheme == "https" or (u.scheme == "http" and u.hostname in ("127.0.0.1", "::1"))):
        raise SystemExit(f"--upstream {name}: the issuer must be https (http only on loopback)")
    if not client_id or not secret:
        raise SystemExit(f"--upstream {name}: client id and secret are required")
    return Upstream(name, issuer, client_id, secret, http, private_key)


def watchdog(server, b: Backend, parent: int, watch_pid: int | None, idle_exit: float):
    """Stops the server when the parent or --watch-pid is gone, or after idle_exit s."""
    while True:
        time.sleep(0.2)
        gone = os.getppid() != parent
        if watch_pid:
            try:
                os.kill(watch_pid, 0)
            except ProcessLookupError:
                gone = True
            except PermissionError:
                pass
        if gone or (idle_exit > 0 and time.monotonic() - b.last_request > idle_exit):
            server.shutdown()
            return


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="SessionVault's reference backend (docs/backend.md).")
    ap.add_argument("--upstream", action="append", required=True,
                    metavar="NAME=ISSUER,CLIENT_ID,CLIENT_SECRET")
    ap.add_argument("--port", type=int, default=0, help="0 = ephemeral (default)")
    ap.add_argument("--db", default=None, help="SQLite file (default: a temporary one)")
    ap.add_argument("--access-ttl", type=int, default=900, help="seconds (default 900)")
    ap.add_argument("--rotation-grace", type=int, default=0,
                    help="seconds the previous refresh token stays usable while its successor is unused "
                         "(0 = strict rotation, the default)")
    ap.add_argument("--session-days", type=float, default=7, help="absolute session limit")
    ap.add_argument("--rate-limit", type=int, default=60, help="token requests per minute per address")
    ap.add_argument("--require-members", metavar="FILE", help="JSON list of members' national IDs")
    ap.add_argument("--watch-pid", type=int, default=None, help="exit when this pid is gone")
    ap.add_argument("--idle-exit", type=float, default=0, help="seconds without requests; 0 = never")
    ap.add_argument("--no-admin", action="store_true",
                    help="no /_admin/ test controls (clock, sessions, stats, outage); for production")
    ap.add_argument("--issued-log", metavar="FILE", help="tests: append every token handed out")
    args = ap.parse_args(argv)

    http = httpx.Client(timeout=httpx.Timeout(10.0, connect=5.0), follow_redirects=False)
    upstreams: dict[str, Upstream] = {}
    for spec in args.upstream:
        up = parse_upstream(spec, http)
        upstreams[up.name] = up
    members = None
    if args.require_members:
        with open(args.require_members, encoding="utf-8") as f:
            members = {str(n) for n in json.load(f)}
    temp_db = None
    if args.db is None:
        fd, temp_db = tempfile.mkstemp(prefix="sessionvault-backend-", suffix=".sqlite3")
        os.close(fd)
        args.db = temp_db

    b = Backend(args, upstreams, members)
    server = make_server("127.0.0.1", args.port, create_app(b), threaded=True,
                         request_handler=LogHandler)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    threading.Thread(target=watchdog, daemon=True,
                     args=(server, b, os.getppid(), args.watch_pid, args.idle_exit)).start()
    # The socket listens already (bound in make_server): connections queue until served.
    print(f"READY http://127.0.0.1:{server.server_port}", flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        for path in (temp_db, f"{temp_db}-journal") if temp_db else ():
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
