"""Tests of the test OIDC providers themselves (stdlib unittest + PyJWT for verification).

    scripts/provider-venv
    .venv/bin/python -m unittest discover -s Tests/providers -v

Every provider is a subprocess started here and stopped in tearDown(Class); every network
call has a timeout; a leftover process is killed at exit.
"""

from __future__ import annotations

import atexit
import base64
import hashlib
import hmac
import http.client
import json
import os
import secrets
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

import jwt  # PyJWT: an independent JOSE implementation to check the providers' tokens
from cryptography.hazmat.primitives import serialization

HERE = Path(__file__).resolve().parent
STRICT = HERE / "strict_provider.py"
MOCK = HERE / "mock_provider.py"
PY = sys.executable
CLIENT_ID = "sessionvault-test"
REDIRECT = "http://127.0.0.1:53682/callback"
HTTP_TIMEOUT = 20
STANDARD_ID_CLAIMS = {"iss", "sub", "aud", "azp", "exp", "iat", "auth_time", "nonce", "at_hash"}

_procs: list[subprocess.Popen] = []


def _kill_all():
    for p in _procs:
        if p.poll() is None:
            p.kill()
            p.wait(5)


atexit.register(_kill_all)


# ---------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------


def b64u(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64u_decode(s: str) -> bytes:
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def jwt_parts(token: str) -> tuple[dict, dict, bytes]:
    h, p, s = token.split(".")
    return json.loads(b64u_decode(h)), json.loads(b64u_decode(p)), b64u_decode(s)


def nin_valid(nin: str) -> bool:
    """Independent mod-11 check of a Norwegian national ID number (classic rule)."""
    if len(nin) != 11 or not nin.isdigit():
        return False
    d = [int(c) for c in nin]
    k1 = (11 - sum(w * x for w, x in zip((3, 7, 6, 1, 8, 9, 4, 5, 2), d)) % 11) % 11
    k2 = (11 - sum(w * x for w, x in zip((5, 4, 3, 2, 7, 6, 5, 4, 3, 2), d)) % 11) % 11
    return k1 == d[9] and k2 == d[10]


def start(script: Path, *args: str, timeout: float = 30) -> tuple[subprocess.Popen, str]:
    """Start a provider, wait for its READY line, return (process, base URL)."""
    err = tempfile.TemporaryFile()
    p = subprocess.Popen([PY, str(script), *args], stdout=subprocess.PIPE, stderr=err,
                         stdin=subprocess.DEVNULL)
    _procs.append(p)
    p._errfile = err  # type: ignore[attr-defined]
    ready, _, _ = select.select([p.stdout], [], [], timeout)
    line = p.stdout.readline().decode() if ready else ""
    if not line.startswith("READY "):
        stop(p)
        err.seek(0)
        raise RuntimeError(f"{script.name} did not get ready: {line!r}\n{err.read().decode()}")
    return p, line.split()[1]


def stop(p: subprocess.Popen):
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)
    if p.stdout:
        p.stdout.close()
    getattr(p, "_errfile", None) and p._errfile.close()  # type: ignore[attr-defined]


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.05)
    return False


class Resp:
    def __init__(self, status: int, headers, body: bytes):
        self.status, self.headers, self.body = status, headers, body

    def json(self):
        return json.loads(self.body)

    @property
    def location(self) -> str:
        return self.headers.get("Location", "")

    def redirect_params(self) -> dict:
        return {k: v[0] for k, v in parse_qs(urlsplit(self.location).query).items()}


def request(method: str, url: str, *, form: dict | None = None, body: bytes | None = None,
            headers: dict | None = None, timeout: float = HTTP_TIMEOUT) -> Resp:
    """One HTTP request on a fresh connection; redirects are not followed."""
    u = urlsplit(url)
    hdrs = dict(headers or {})
    if form is not None:
        body = urlencode(form).encode()
        hdrs.setdefault("Content-Type", "application/x-www-form-urlencoded")
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    try:
        conn.request(method, u.path + ("?" + u.query if u.query else ""), body=body, headers=hdrs)
        r = conn.getresponse()
        return Resp(r.status, r.headers, r.read())
    finally:
        conn.close()


def admin(base: str, path: str, body: dict | None = None) -> dict:
    if body is None and path in ("stats", "behavior", "users", "config"):
        r = request("GET", f"{base}/_admin/{path}")
    else:
        r = request("POST", f"{base}/_admin/{path}", body=json.dumps(body or {}).encode(),
                    headers={"Content-Type": "application/json"})
    assert r.status == 200, (path, r.status, r.body)
    return r.json()


def basic(client_id: str, secret: str) -> dict:
    return {"Authorization": "Basic " + base64.b64encode(f"{client_id}:{secret}".encode()).decode()}


# ---------------------------------------------------------------------------------------
# strict provider
# ---------------------------------------------------------------------------------------


class StrictCase(unittest.TestCase):
    profile = "generic"
    alg = "RS256"
    extra_args: tuple[str, ...] = ()
    scope = "openid profile email"

    @classmethod
    def setUpClass(cls):
        cls.proc, cls.base = start(STRICT, "--profile", cls.profile, "--idle-exit", "120",
                                   *cls.extra_args)

    @classmethod
    def tearDownClass(cls):
        stop(cls.proc)

    def setUp(self):
        admin(self.base, "reset")

    # --- flow helpers -------------------------------------------------------------------
    def authorize(self, user: str | None = "kari", scope: str | None = None, drop=(), **extra) -> tuple[Resp, dict]:
        verifier = secrets.token_urlsafe(48)
        ctx = {"verifier": verifier, "state": secrets.token_urlsafe(12),
               "nonce": secrets.token_urlsafe(12), "redirect_uri": REDIRECT}
        params = {"client_id": CLIENT_ID, "redirect_uri": REDIRECT, "response_type": "code",
                  "scope": scope or self.scope, "state": ctx["state"], "nonce": ctx["nonce"],
                  "code_challenge": b64u(hashlib.sha256(verifier.encode()).digest()),
                  "code_challenge_method": "S256"}
        if user:
            params["test_user"] = user
        params.update(extra)
        for k in drop:
            params.pop(k, None)
        r = request("GET", f"{self.base}/authorize?{urlencode(params)}")
        return r, ctx

    def login(self, user="kari", scope=None) -> dict:
        r, ctx = self.authorize(user, scope)
        self.assertEqual(r.status, 302, r.body)
        q = r.redirect_params()
        self.assertTrue(r.location.startswith(REDIRECT + "?"), r.location)
        self.assertEqual(q["state"], ctx["state"])
        self.assertNotIn("error", q)
        ctx.update(q)
        return ctx

    def exchange(self, ctx: dict, **override) -> Resp:
        form = {"grant_type": "authorization_code", "code": ctx["code"],
                "redirect_uri": ctx["redirect_uri"], "code_verifier": ctx["verifier"],
                "client_id": CLIENT_ID}
        headers = override.pop("headers", None)
        form.update(override)
        form = {k: v for k, v in form.items() if v is not None}
        return request("POST", f"{self.base}/token", form=form, headers=headers)

    def tokens(self, user="kari", scope=None) -> tuple[dict, dict]:
        ctx = self.login(user, scope)
        r = self.exchange(ctx)
        self.assertEqual(r.status, 200, r.body)
        self.assertEqual(r.headers.get("Cache-Control"), "no-store")
        return ctx, r.json()

    def refresh(self, rt: str, **extra) -> Resp:
        return request("POST", f"{self.base}/token",
                       form={"grant_type": "refresh_token", "refresh_token": rt,
                             "client_id": CLIENT_ID, **extra})

    def userinfo(self, at: str) -> Resp:
        return request("GET", f"{self.base}/userinfo", headers={"Authorization": f"Bearer {at}"})

    def jwks(self) -> dict:
        r = request("GET", f"{self.base}/jwks")
        self.assertEqual(r.status, 200)
        return r.json()

    def verify(self, id_token: str, nonce: str | None = None, access_token: str | None = None) -> dict:
        """Full ID token verification with PyJWT against the published JWKS."""
        header = jwt.get_unverified_header(id_token)
        self.assertEqual(header["alg"], self.alg)
        keys = {k["kid"]: k for k in self.jwks()["keys"]}
        self.assertIn(header["kid"], keys)
        key = jwt.PyJWK(keys[header["kid"]])
        claims = jwt.decode(id_token, key.key, algorithms=[self.alg], audience=CLIENT_ID,
                            issuer=self.base,
                            options={"require": ["iss", "sub", "aud", "exp", "iat"]})
        self.assertEqual(claims["azp"], CLIENT_ID)
        if nonce is not None:
            self.assertEqual(claims["nonce"], nonce)
        if access_token is not None:
            self.assertEqual(claims["at_hash"],
                             b64u(hashlib.sha256(access_token.encode()).digest()[:16]))
        return claims

    def behave(self, **b) -> dict:
        return admin(self.base, "behavior", b)

    def assert_oauth_error(self, r: Resp, error: str, status: int = 400):
        self.assertEqual(r.status, status, r.body)
        self.assertEqual(r.json()["error"], error)

    # --- tests shared by every profile ----------------------------------------------------
    def test_discovery(self):
        r = request("GET", f"{self.base}/.well-known/openid-configuration")
        self.assertEqual(r.status, 200)
        d = r.json()
        self.assertEqual(d["issuer"], self.base)
        self.assertFalse(d["issuer"].endswith("/"))
        for ep in ("authorization", "token", "userinfo", "revocation"):
            self.assertTrue(d[f"{ep}_endpoint"].startswith(self.base + "/"))
        self.assertEqual(d["jwks_uri"], self.base + "/jwks")
        self.assertEqual(d["code_challenge_methods_supported"], ["S256"])
        self.assertEqual(d["id_token_signing_alg_values_supported"], [self.alg])
        self.assertIs(d["authorization_response_iss_parameter_supported"], True)
        self.assertEqual(d["token_endpoint_auth_methods_supported"], ["none"])
        for k in self.jwks()["keys"]:
            self.assertEqual(k["alg"], self.alg)
            self.assertIn("kid", k)
            self.assertNotIn("d", k)  # no private parts

    def test_code_flow_with_pkce(self):
        ctx = self.login("kari")
        self.assertEqual(ctx["iss"], self.base)  # RFC 9207
        r = self.exchange(ctx)
        self.assertEqual(r.status, 200, r.body)
        tok = r.json()
        self.assertEqual(tok["token_type"], "Bearer")
        self.assertEqual(tok["expires_in"], 300)
        claims = self.verify(tok["id_token"], ctx["nonce"], tok["access_token"])
        self.assertLessEqual(claims["iat"], time.time() + 1)
        self.assertGreater(claims["exp"], time.time())
        u = self.userinfo(tok["access_token"])
        self.assertEqual(u.status, 200, u.body)
        self.assertEqual(u.json()["sub"], claims["sub"])
        st = admin(self.base, "stats")
        self.assertEqual(st["token_grants"]["authorization_code"], 1)
        self.assertEqual(st["requests"]["authorize"], 1)
        self.assertEqual(st["client_auth"], {"none": 1})
        self.assertEqual(st["last_authorize"]["code_challenge_method"], "S256")

    def test_code_is_one_time_and_replay_revokes(self):
        ctx, tok = self.tokens()
        self.assert_oauth_error(self.exchange(ctx), "invalid_grant")
        self.assertEqual(self.userinfo(tok["access_token"]).status, 401)
        if "refresh_token" in tok:
            self.assert_oauth_error(self.refresh(tok["refresh_token"]), "invalid_grant")
        self.assertEqual(admin(self.base, "stats")["code_replays"], 1)

    def test_pkce_is_required_s256_only(self):
        r, ctx = self.authorize(drop=("code_challenge", "code_challenge_method"))
        self.assertEqual(r.status, 302)
        q = r.redirect_params()
        self.assertEqual(q["error"], "invalid_request")
        self.assertEqual(q["state"], ctx["state"])
        self.assertEqual(q["iss"], self.base)
        self.assertNotIn("code", q)
        r, _ = self.authorize(code_challenge_method="plain")
        self.assertEqual(r.redirect_params()["error"], "invalid_request")
        r, _ = self.authorize(drop=("code_challenge_method",))  # RFC 7636 default is plain
        self.assertEqual(r.redirect_params()["error"], "invalid_request")
        ctx = self.login()
        self.assert_oauth_error(self.exchange(ctx, code_verifier=secrets.token_urlsafe(48)),
                                "invalid_grant")
        ctx = self.login()
        self.assert_oauth_error(self.exchange(ctx, code_verifier=None), "invalid_request")

    def test_authorize_validation(self):
        # not redirected: unknown client, untrusted redirect_uri
        for extra in ({"client_id": "nope"}, {"redirect_uri": "http://localhost:5000/cb"},
                      {"redirect_uri": "https://evil.example/cb"}, {"redirect_uri": "http://127.0.0.1/cb"}):
            r, _ = self.authorize(**extra)
            self.assertEqual(r.status, 400, extra)
            self.assertEqual(r.location, "")
        # redirected with an error
        for extra, drop, err in (({"response_type": "token"}, (), "unsupported_response_type"),
                                 ({"scope": "profile"}, (), "invalid_scope"),
                                 ({}, ("nonce",), "invalid_request")):
            r, _ = self.authorize(drop=drop, **extra)
            self.assertEqual(r.status, 302)
            self.assertEqual(r.redirect_params()["error"], err)
        r, _ = self.authorize(drop=("state",))
        self.assertEqual(r.redirect_params()["error"], "invalid_request")
        self.assertNotIn("state", r.redirect_params())
        # any loopback port is fine (RFC 8252), and the token request must repeat it exactly
        r, ctx = self.authorize(redirect_uri="http://127.0.0.1:40001/cb?x=1")
        self.assertTrue(r.location.startswith("http://127.0.0.1:40001/cb?x=1&code="), r.location)
        ctx["code"] = r.redirect_params()["code"]
        self.assert_oauth_error(self.exchange(ctx, redirect_uri=REDIRECT), "invalid_grant")

    def test_login_page_and_form_post(self):
        r, ctx = self.authorize(user=None)
        self.assertEqual(r.status, 200)
        page = r.body.decode()
        for uid in ("kari", "ola", "ung", "dina"):
            self.assertIn(f'value="{uid}"', page)
        self.assertIn('value=cancel', page)
        # the page's form posts every parameter back plus sub=<user>
        st = admin(self.base, "stats")["last_authorize"]
        r3 = request("POST", f"{self.base}/authorize", form={**st, "sub": "ola"})
        self.assertEqual(r3.status, 302, r3.body)
        self.assertIn("code", r3.redirect_params())
        r4 = request("POST", f"{self.base}/authorize", form={**st, "action": "cancel"})
        self.assertEqual(r4.redirect_params()["error"], "access_denied")
        # mock-style: POST the authorization URL itself with form field sub
        r5, c5 = self.authorize(user=None)
        url = f"{self.base}/authorize?" + urlencode(admin(self.base, "stats")["last_authorize"])
        r6 = request("POST", url, form={"sub": "kari"})
        self.assertEqual(r6.status, 302)
        self.assertEqual(r6.redirect_params()["state"], c5["state"])

    def test_signed_in_at_the_provider_logs_in_without_a_page(self):
        self.behave(signed_in_as="ola")
        r, ctx = self.authorize(user=None)
        self.assertEqual(r.status, 302, r.body)
        ctx["code"] = r.redirect_params()["code"]
        tok = self.exchange(ctx).json()
        self.assertEqual(self.userinfo(tok["access_token"]).json()["name"], "Ola Nordmann")
        r, _ = self.authorize(user="kari")  # a user named in the request still wins
        self.assertEqual(r.status, 302)
        self.behave(signed_in_as=None)
        self.assertEqual(self.authorize(user=None)[0].status, 200, "signed out: the page to click on")

    def test_revocation(self):
        _, tok = self.tokens()
        r = request("POST", f"{self.base}/revoke", form={"token": tok["access_token"], "client_id": CLIENT_ID})
        self.assertEqual(r.status, 200)
        self.assertEqual(self.userinfo(tok["access_token"]).status, 401)
        r = request("POST", f"{self.base}/revoke", form={"token": "unknown", "client_id": CLIENT_ID})
        self.assertEqual(r.status, 200)
        if "refresh_token" in tok:
            _, tok = self.tokens()
            r = request("POST", f"{self.base}/revoke",
                        form={"token": tok["refresh_token"], "token_type_hint": "refresh_token",
                              "client_id": CLIENT_ID})
            self.assertEqual(r.status, 200)
            self.assert_oauth_error(self.refresh(tok["refresh_token"]), "invalid_grant")
            self.assertEqual(self.userinfo(tok["access_token"]).status, 401)
        self.assertFalse(admin(self.base, "introspect", {"token": tok["access_token"]})["active"])

    def test_confidential_client(self):
        cfg = admin(self.base, "config", {"client_secret": "s3cr:et"})
        self.assertEqual(cfg["client_secret"], "s3cr:et")
        d = request("GET", f"{self.base}/.well-known/openid-configuration").json()
        self.assertEqual(d["token_endpoint_auth_methods_supported"],
                         ["client_secret_basic", "client_secret_post"])
        ctx = self.login()
        self.assert_oauth_error(self.exchange(ctx), "invalid_client", 401)  # public: refused
        ctx = self.login()
        self.assert_oauth_error(self.exchange(ctx, client_secret="wrong"), "invalid_client", 401)
        ctx = self.login()
        self.assertEqual(self.exchange(ctx, client_secret="s3cr:et").status, 200)
        ctx = self.login()
        # RFC 6749 2.3.1: id and secret are form-urlencoded before base64 (":" -> %3A)
        self.assertEqual(self.exchange(ctx, client_id=None, headers=basic(CLIENT_ID, "s3cr%3Aet")).status, 200)
        ctx = self.login()
        self.assert_oauth_error(self.exchange(ctx, client_secret="s3cr:et",
                                              headers=basic(CLIENT_ID, "s3cr%3Aet")), "invalid_request")
        st = admin(self.base, "stats")
        self.assertEqual(st["client_auth"], {"none": 1, "client_secret_post": 2, "client_secret_basic": 1})
        admin(self.base, "config", {"client_auth_methods": ["client_secret_basic"]})
        ctx = self.login()
        self.assert_oauth_error(self.exchange(ctx, client_secret="s3cr:et"), "invalid_client", 401)

    def test_private_key_jwt(self):
        """RFC 7523 2.2: the client proves itself with a JWT signed by its registered key."""
        from cryptography.hazmat.primitives.asymmetric import ec, rsa
        ec_key = ec.generate_private_key(ec.SECP256R1())
        other = ec.generate_private_key(ec.SECP256R1())
        pem = ec_key.public_key().public_bytes(serialization.Encoding.PEM,
                                               serialization.PublicFormat.SubjectPublicKeyInfo).decode()
        admin(self.base, "config", {"client_public_key": pem, "client_auth_methods": ["private_key_jwt"]})
        d = request("GET", f"{self.base}/.well-known/openid-configuration").json()
        self.assertEqual(d["token_endpoint_auth_methods_supported"], ["private_key_jwt"])
        aud = d["token_endpoint"]

        def assertion(key=ec_key, alg="ES256", **claims) -> dict:
            now = int(time.time())
            body = {"iss": CLIENT_ID, "sub": CLIENT_ID, "aud": aud, "iat": now, "exp": now + 60,
                    "jti": secrets.token_urlsafe(12), **claims}
            body = {k: v for k, v in body.items() if v is not None}
            return {"client_assertion_type": "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
                    "client_assertion": jwt.encode(body, key, algorithm=alg)}

        good = assertion()
        self.assertEqual(self.exchange(self.login(), **good).status, 200)
        self.assert_oauth_error(self.exchange(self.login(), **good), "invalid_client", 401)  # replayed jti
        for bad in (assertion(key=other), assertion(aud="https://elsewhere.example/token"),
                    assertion(exp=int(time.time()) - 5), assertion(exp=int(time.time()) + 3600),
                    assertion(iss="someone-else"), assertion(jti=None),
                    assertion(key=rsa.generate_private_key(public_exponent=65537, key_size=2048), alg="RS256")):
            self.assert_oauth_error(self.exchange(self.login(), **bad), "invalid_client", 401)
        self.assert_oauth_error(self.exchange(self.login()), "invalid_client", 401)    # no proof at all
        self.assert_oauth_error(self.exchange(self.login(), client_secret="guess"), "invalid_client", 401)
        self.assert_oauth_error(self.exchange(self.login(), client_secret="x", **assertion()), "invalid_request")
        self.assertEqual(admin(self.base, "stats")["client_auth"].get("private_key_jwt"), 9)
        # A code refused for a bad assertion is not spent: the right one still redeems it.
        ctx = self.login()
        self.assert_oauth_error(self.exchange(ctx, **assertion(key=other)), "invalid_client", 401)
        self.assertEqual(self.exchange(ctx, **assertion()).status, 200)

    def test_key_rotation(self):
        old = self.jwks()["keys"][0]["kid"]
        rot = admin(self.base, "rotate-keys", {"keep_old": True})
        self.assertNotEqual(rot["kid"], old)
        self.assertEqual(rot["kids"], [old, rot["kid"]])
        self.assertEqual([k["kid"] for k in self.jwks()["keys"]], [old, rot["kid"]])
        ctx, tok = self.tokens()
        self.assertEqual(jwt.get_unverified_header(tok["id_token"])["kid"], rot["kid"])
        self.verify(tok["id_token"], ctx["nonce"])
        rot2 = admin(self.base, "rotate-keys", {"keep_old": False})
        self.assertEqual([k["kid"] for k in self.jwks()["keys"]], [rot2["kid"]])

    def test_admin_user_claims_and_expiry(self):
        out = admin(self.base, "users/kari", {"org": "mentor-trondheim", "roles": ["admin"], "email": None})
        self.assertEqual(out["org"], "mentor-trondheim")
        self.assertNotIn("email", out)
        _, tok = self.tokens()
        u = self.userinfo(tok["access_token"]).json()
        self.assertEqual(u["org"], "mentor-trondheim")
        self.assertEqual(u["roles"], ["admin"])
        admin(self.base, "users/newbie", {"name": "New Bie"})
        self.tokens("newbie")
        admin(self.base, "expire-tokens", {"access": True, "refresh": True})
        self.assertEqual(self.userinfo(tok["access_token"]).status, 401)
        if "refresh_token" in tok:
            self.assert_oauth_error(self.refresh(tok["refresh_token"]), "invalid_grant")
        r = request("POST", f"{self.base}/_admin/behavior", body=b'{"no_such_thing": true}')
        self.assertEqual(r.status, 400)


class TestBankID(StrictCase):
    profile = "bankid"
    alg = "ES256"
    scope = "openid profile nnin_altsub"

    def test_bankid_claims(self):
        ctx, tok = self.tokens("kari")
        c = self.verify(tok["id_token"], ctx["nonce"], tok["access_token"])
        self.assertEqual(c["name"], "Kari Nordmann")
        self.assertEqual(c["acr"], "urn:bankid:bid;LOA=4")
        self.assertTrue(nin_valid(c["nnin_altsub"]), c["nnin_altsub"])
        self.assertGreater(int(c["nnin_altsub"][2:4]), 80)  # synthetic test number
        self.assertEqual(c["nnin_altsub"][:4], "1583")
        self.assertIn("bankid_altsub", c)
        # sub changes per login, bankid_altsub does not
        _, tok2 = self.tokens("kari")
        c2 = self.verify(tok2["id_token"])
        self.assertNotEqual(c["sub"], c2["sub"])
        self.assertEqual(c["bankid_altsub"], c2["bankid_altsub"])
        u = self.userinfo(tok2["access_token"]).json()
        self.assertEqual(u["sub"], c2["sub"])
        self.assertEqual(u["bankid_altsub"], c2["bankid_altsub"])

    def test_all_synthetic_identities_are_valid(self):
        users = admin(self.base, "users")
        self.assertGreaterEqual(len(users), 3)
        for uid, u in users.items():
            self.assertTrue(nin_valid(u["nin"]), (uid, u["nin"]))
            self.assertGreater(int(u["nin"][2:4]), 80)
        self.assertGreater(int(users["dina"]["nin"][:2]), 40)  # D-number
        self.assertGreaterEqual(int(users["ung"]["nin"][6:9]), 500)  # born 2000-2039
        self.assertTrue(users["ung"]["birthdate"].startswith("2012"))

    def test_refresh_rotation_and_reuse_detection(self):
        ctx, tok = self.tokens()
        first = self.verify(tok["id_token"])
        rt1 = tok["refresh_token"]
        before_ns = time.monotonic_ns()
        r = self.refresh(rt1)
        self.assertEqual(r.status, 200, r.body)
        rotated_ns = admin(self.base, "stats")["last_rotation_ns"]
        self.assertTrue(before_ns <= rotated_ns <= time.monotonic_ns(), rotated_ns)
        t2 = r.json()
        rt2 = t2["refresh_token"]
        self.assertNotEqual(rt1, rt2)
        c2 = self.verify(t2["id_token"], access_token=t2["access_token"])
        self.assertEqual(c2["sub"], first["sub"])          # same login, same sub
        self.assertEqual(c2["auth_time"], first["auth_time"])
        self.assertNotIn("nonce", c2)
        t3 = self.refresh(rt2).json()
        rt3 = t3["refresh_token"]
        self.assertEqual(self.userinfo(t3["access_token"]).status, 200)
        # reuse of rt1 -> invalid_grant and the whole family is revoked
        self.assert_oauth_error(self.refresh(rt1), "invalid_grant")
        self.assert_oauth_error(self.refresh(rt3), "invalid_grant")
        self.assert_oauth_error(self.refresh(rt2), "invalid_grant")
        self.assertEqual(self.userinfo(t3["access_token"]).status, 401)
        st = admin(self.base, "stats")
        self.assertEqual(st["refresh_reuse_detected"], 1)
        self.assertEqual(st["families_revoked"], 1)
        self.assertEqual(st["token_grants"]["refresh_token"], 5)
        self.assertEqual(st["token_errors"]["invalid_grant"], 3)
        i = admin(self.base, "introspect", {"token": rt3})
        self.assertEqual((i["kind"], i["active"], i["family_revoked"]),
                         ("refresh_token", False, "refresh token reuse"))
        # another login is a new family, unaffected
        _, other = self.tokens()
        self.assertEqual(self.refresh(other["refresh_token"]).status, 200)

    def test_rotation_grace_accepts_the_previous_token_until_its_successor_is_used(self):
        admin(self.base, "config", {"rotation_grace": True})
        _, tok = self.tokens()
        rt1 = tok["refresh_token"]
        rt2 = self.refresh(rt1).json()["refresh_token"]       # the client "crashes" before storing rt2
        r = self.refresh(rt1)                                  # ...and retries with rt1: accepted
        self.assertEqual(r.status, 200, r.body)
        rt2b = r.json()["refresh_token"]
        self.assertNotEqual(rt2b, rt2)
        self.assertEqual(admin(self.base, "stats")["refresh_grace_used"], 1)
        rt3 = self.refresh(rt2b).json()["refresh_token"]      # the successor is used now
        # rt2 (superseded) and rt1 (its successor used) are both reuse: the family is revoked.
        self.assert_oauth_error(self.refresh(rt1), "invalid_grant")
        self.assert_oauth_error(self.refresh(rt3), "invalid_grant")
        st = admin(self.base, "stats")
        self.assertEqual((st["refresh_grace_used"], st["refresh_reuse_detected"], st["families_revoked"]), (1, 1, 1))
        # without the grace, the first retry is already reuse
        admin(self.base, "config", {"rotation_grace": False})
        _, tok = self.tokens()
        self.assertEqual(self.refresh(tok["refresh_token"]).status, 200)
        self.assert_oauth_error(self.refresh(tok["refresh_token"]), "invalid_grant")

    def test_refresh_cannot_widen_scope(self):
        _, tok = self.tokens()
        self.assert_oauth_error(self.refresh(tok["refresh_token"], scope="openid email"), "invalid_scope")

    def test_hs256_uses_the_ec_public_key_pem(self):
        self.behave(hs256_with_public_key=True)
        _, tok = self.tokens()
        h, p, sig = jwt_parts(tok["id_token"])
        self.assertEqual(h["alg"], "HS256")
        pem = jwt.PyJWK(self.jwks()["keys"][0]).key.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        signing_input = tok["id_token"].rsplit(".", 1)[0].encode()
        self.assertEqual(sig, hmac.new(pem, signing_input, hashlib.sha256).digest())


class TestVipps(StrictCase):
    profile = "vipps"
    alg = "RS256"
    scope = "openid name phoneNumber nin"

    def test_vipps_claims_come_from_userinfo_only(self):
        ctx, tok = self.tokens("ola")
        self.assertNotIn("refresh_token", tok)
        c = self.verify(tok["id_token"], ctx["nonce"], tok["access_token"])
        self.assertLessEqual(set(c), STANDARD_ID_CLAIMS)  # nothing about the person
        u = self.userinfo(tok["access_token"]).json()
        self.assertEqual(u["sub"], c["sub"])
        self.assertEqual(u["name"], "Ola Nordmann")
        self.assertEqual(u["phone_number"], "4798765432")
        self.assertTrue(nin_valid(u["nin"]))
        # sub is stable across logins
        _, tok2 = self.tokens("ola")
        self.assertEqual(self.verify(tok2["id_token"])["sub"], c["sub"])

    def test_vipps_scopes_filter_userinfo(self):
        _, tok = self.tokens("kari", scope="openid name")
        u = self.userinfo(tok["access_token"]).json()
        self.assertIn("name", u)
        self.assertNotIn("nin", u)
        self.assertNotIn("phone_number", u)

    def test_vipps_has_no_refresh(self):
        d = request("GET", f"{self.base}/.well-known/openid-configuration").json()
        self.assertEqual(d["grant_types_supported"], ["authorization_code"])
        self.assert_oauth_error(self.refresh("anything"), "unsupported_grant_type")


class TestGeneric(StrictCase):
    profile = "generic"

    def test_refresh_without_rotation(self):
        ctx, tok = self.tokens()
        rt = tok["refresh_token"]
        for _ in range(3):
            r = self.refresh(rt)
            self.assertEqual(r.status, 200, r.body)
            t = r.json()
            self.assertNotIn("refresh_token", t)
            self.verify(t["id_token"], access_token=t["access_token"])
        self.assertEqual(admin(self.base, "stats")["refresh_reuse_detected"], 0)

    # --- ID token behaviours -----------------------------------------------------------
    def id_token_with(self, **b) -> tuple[dict, dict, dict, str]:
        self.behave(**b)
        ctx, tok = self.tokens()
        h, p, _ = jwt_parts(tok["id_token"])
        return h, p, ctx, tok["id_token"]

    def assert_rejected(self, token: str, exc=jwt.InvalidTokenError):
        key = jwt.PyJWK(self.jwks()["keys"][0]).key
        with self.assertRaises(exc):
            jwt.decode(token, key, algorithms=["RS256"], audience=CLIENT_ID, issuer=self.base)

    def test_id_token_claim_behaviours(self):
        h, p, ctx, t = self.id_token_with(wrong_iss=True)
        self.assertEqual(p["iss"], self.base + "/other")
        self.assert_rejected(t, jwt.InvalidIssuerError)
        admin(self.base, "reset")
        h, p, ctx, t = self.id_token_with(wrong_aud=True)
        self.assertEqual(p["aud"], "other-client")
        self.assert_rejected(t, jwt.InvalidAudienceError)
        admin(self.base, "reset")
        h, p, ctx, t = self.id_token_with(extra_aud="someone")
        self.assertEqual((p["aud"], p["azp"]), ([CLIENT_ID, "someone"], CLIENT_ID))
        admin(self.base, "reset")
        h, p, ctx, t = self.id_token_with(expired_id_token=True)
        self.assertLess(p["exp"], time.time() - 500)
        self.assert_rejected(t, jwt.ExpiredSignatureError)
        admin(self.base, "reset")
        h, p, ctx, t = self.id_token_with(iat_in_future=True)
        self.assertGreater(p["iat"], time.time() + 3000)
        admin(self.base, "reset")
        h, p, ctx, t = self.id_token_with(nonce_mismatch=True)
        self.assertNotEqual(p["nonce"], ctx["nonce"])
        admin(self.base, "reset")
        h, p, ctx, t = self.id_token_with(missing_nonce=True)
        self.assertNotIn("nonce", p)
        admin(self.base, "reset")
        self.behave(wrong_at_hash=True)
        ctx, tok = self.tokens()
        p = jwt_parts(tok["id_token"])[1]
        self.assertNotEqual(p["at_hash"], b64u(hashlib.sha256(tok["access_token"].encode()).digest()[:16]))
        self.verify(tok["id_token"])  # otherwise valid

    def test_id_token_signature_behaviours(self):
        h, p, ctx, t = self.id_token_with(alg_none=True)
        self.assertEqual(h["alg"], "none")
        self.assertTrue(t.endswith("."))
        self.assert_rejected(t)
        admin(self.base, "reset")
        h, p, ctx, t = self.id_token_with(hs256_with_public_key=True)
        self.assertEqual(h["alg"], "HS256")
        pem = jwt.PyJWK(self.jwks()["keys"][0]).key.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        self.assertEqual(jwt_parts(t)[2], hmac.new(pem, t.rsplit(".", 1)[0].encode(), hashlib.sha256).digest())
        self.assert_rejected(t)
        admin(self.base, "reset")
        h, p, ctx, t = self.id_token_with(unknown_kid=True)
        self.assertNotIn(h["kid"], [k["kid"] for k in self.jwks()["keys"]])
        self.assertEqual(h["alg"], "RS256")
        self.assert_rejected(t, jwt.InvalidSignatureError)
        admin(self.base, "reset")
        h, p, ctx, t = self.id_token_with(no_kid=True)
        self.assertNotIn("kid", h)
        jwt.decode(t, jwt.PyJWK(self.jwks()["keys"][0]).key, algorithms=["RS256"],
                   audience=CLIENT_ID, issuer=self.base)

    def test_behaviour_times_and_grant_scoping(self):
        self.behave(wrong_iss={"value": True, "grant": "refresh_token", "times": 1})
        ctx, tok = self.tokens()
        self.verify(tok["id_token"])  # code exchange unaffected
        t1 = self.refresh(tok["refresh_token"]).json()
        self.assertEqual(jwt_parts(t1["id_token"])[1]["iss"], self.base + "/other")
        t2 = self.refresh(tok["refresh_token"]).json()
        self.verify(t2["id_token"])  # used up
        self.assertEqual(admin(self.base, "behavior"), {})
        self.assertEqual(admin(self.base, "stats")["behaviours_applied"], {"wrong_iss": 1})

    # --- authorization response behaviours ----------------------------------------------
    def test_authorization_response_behaviours(self):
        self.behave(mixup_iss=True)
        q = self.authorize()[0].redirect_params()
        self.assertIn("code", q)
        self.assertNotEqual(q["iss"], self.base)
        self.behave(mixup_iss=None, no_iss_parameter=True)
        q = self.authorize()[0].redirect_params()
        self.assertNotIn("iss", q)
        d = request("GET", f"{self.base}/.well-known/openid-configuration").json()
        self.assertTrue(d["authorization_response_iss_parameter_supported"])
        self.behave(no_iss_parameter=None, error_and_code=True)
        q = self.authorize()[0].redirect_params()
        self.assertEqual(q["error"], "access_denied")
        self.assertIn("code", q)
        self.behave(error_and_code=None, authorize_error=True)
        q = self.authorize()[0].redirect_params()
        self.assertEqual(q["error"], "access_denied")
        self.assertNotIn("code", q)
        self.assertEqual(q["iss"], self.base)
        self.behave(authorize_error="server_error")
        self.assertEqual(self.authorize()[0].redirect_params()["error"], "server_error")
        self.behave(authorize_error=None)
        admin(self.base, "config", {"iss_parameter_supported": False})
        d = request("GET", f"{self.base}/.well-known/openid-configuration").json()
        self.assertIs(d["authorization_response_iss_parameter_supported"], False)
        self.assertNotIn("iss", self.authorize()[0].redirect_params())

    # --- token endpoint behaviours --------------------------------------------------------
    def test_token_error_behaviours(self):
        ctx = self.login()
        self.behave(token_error={"value": "invalid_grant", "times": 1})
        self.assert_oauth_error(self.exchange(ctx), "invalid_grant")
        self.assertEqual(self.exchange(ctx).status, 200)  # error happened before the code was used
        for value, status in (("server_error", 500), ("temporarily_unavailable", 503)):
            self.behave(token_error=value)
            self.assert_oauth_error(self.exchange(self.login()), value, status)
        self.behave(token_error={"value": "server_error", "status": 400})
        self.assert_oauth_error(self.exchange(self.login()), "server_error", 400)
        self.behave(token_error=503)
        r = self.exchange(self.login())
        self.assertEqual(r.status, 503)
        self.assertTrue(r.headers["Content-Type"].startswith("text/html"))
        self.behave(token_error=None)
        self.assertEqual(admin(self.base, "stats")["token_errors"]["503"], 1)

    def test_malformed_token_response_uses_nothing_up(self):
        ctx = self.login()
        self.behave(malformed_token_response={"value": True, "times": 1})
        r = self.exchange(ctx)
        self.assertEqual(r.status, 200)
        with self.assertRaises(ValueError):
            json.loads(r.body)
        self.assertEqual(self.exchange(ctx).status, 200)  # the code was not used up

    def test_huge_token_response(self):
        self.behave(huge_token_response=True)
        r = self.exchange(self.login())
        self.assertEqual(r.status, 200)
        self.assertGreaterEqual(len(r.body), 10 * 1024 * 1024)
        self.assertIn("access_token", r.json())

    def test_slow_token_and_concurrency(self):
        self.behave(slow_token=1)
        ctxs = [self.login() for _ in range(3)]
        results = []
        t0 = time.monotonic()
        threads = [threading.Thread(target=lambda c=c: results.append(self.exchange(c).status)) for c in ctxs]
        for t in threads:
            t.start()
        for t in threads:
            t.join(15)
        elapsed = time.monotonic() - t0
        self.assertEqual(results, [200, 200, 200])
        self.assertGreaterEqual(elapsed, 1.0)
        self.assertLess(elapsed, 2.5)  # served in parallel
        self.assertEqual(admin(self.base, "stats")["max_concurrent_token"], 3)
        with self.assertRaises((TimeoutError, OSError)):
            request("POST", f"{self.base}/token", form={"grant_type": "x"}, timeout=0.3)

    def test_drop_connection(self):
        self.behave(drop_connection=True)
        with self.assertRaises((http.client.RemoteDisconnected, ConnectionError)):
            self.exchange(self.login())
        self.behave(drop_connection=["userinfo", "jwks"])
        self.assertEqual(self.exchange(self.login()).status, 200)
        with self.assertRaises((http.client.RemoteDisconnected, ConnectionError)):
            request("GET", f"{self.base}/jwks")

    def test_userinfo_sub_mismatch(self):
        self.behave(userinfo_sub_mismatch=True)
        _, tok = self.tokens()
        sub = self.verify(tok["id_token"])["sub"]
        self.assertNotEqual(self.userinfo(tok["access_token"]).json()["sub"], sub)

    def test_endpoint_status_slow_and_discovery_mismatch(self):
        self.behave(endpoint_status={"discovery": 503, "userinfo": 500})
        self.assertEqual(request("GET", f"{self.base}/.well-known/openid-configuration").status, 503)
        self.assertEqual(self.userinfo("x").status, 500)
        self.behave(endpoint_status=None, slow={"jwks": 0.5}, discovery_issuer_mismatch=True)
        t0 = time.monotonic()
        self.jwks()
        self.assertGreaterEqual(time.monotonic() - t0, 0.5)
        d = request("GET", f"{self.base}/.well-known/openid-configuration").json()
        self.assertNotEqual(d["issuer"], self.base)

    def test_stats_counts_endpoints(self):
        _, tok = self.tokens()
        self.refresh(tok["refresh_token"])
        self.userinfo(tok["access_token"])
        self.jwks()
        st = admin(self.base, "stats")
        self.assertEqual(st["requests"]["token"], 2)
        self.assertEqual(st["requests"]["userinfo"], 1)
        self.assertEqual(st["requests"]["jwks"], 1)
        self.assertEqual(st["token_grants"], {"authorization_code": 1, "refresh_token": 1, "other": 0})
        self.assertEqual(st["logins"], {"kari": 1})
        self.assertEqual(st["active"]["refresh_tokens"], 1)


    def test_keep_alive_answers_do_not_stall(self):
        """Nagle off: ten answers on one kept-alive connection take far less than the
        ten 40 ms delayed-ACK stalls they would take with it on."""
        u = urlsplit(self.base)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=HTTP_TIMEOUT)
        try:
            t0 = time.monotonic()
            for _ in range(10):
                conn.request("GET", "/jwks")
                r = conn.getresponse()
                r.read()
                self.assertEqual(r.status, 200)
            self.assertLess(time.monotonic() - t0, 0.3)
        finally:
            conn.close()

    def test_token_calls_are_timed(self):
        before = time.monotonic_ns()
        _, tok = self.tokens()
        self.behave(slow_token={"value": 0.2, "grant": "refresh_token", "times": 1})
        self.refresh(tok["refresh_token"])
        self.refresh("not-a-refresh-token")
        calls = admin(self.base, "stats")["token_calls"]  # waits for the last call's record
        after = time.monotonic_ns()
        self.assertEqual([(c["grant"], c["status"]) for c in calls],
                         [("authorization_code", 200), ("refresh_token", 200), ("refresh_token", 400)])
        for c in calls:  # on this process's monotonic clock, in the order they began
            self.assertLessEqual(before, c["start_ns"])
            self.assertLessEqual(c["start_ns"], c["end_ns"])
            self.assertLessEqual(c["end_ns"], after)
            self.assertAlmostEqual(c["ms"], (c["end_ns"] - c["start_ns"]) / 1e6, places=3)
        self.assertEqual(calls, sorted(calls, key=lambda c: c["start_ns"]))
        self.assertGreaterEqual(calls[1]["ms"], 200)  # the slow one
        self.assertLess(calls[0]["ms"], 200)
        # A client that has its answer finds the call in the stats at once.
        for n in range(1, 21):
            self.refresh(tok["refresh_token"])
            self.assertEqual(len(admin(self.base, "stats")["token_calls"]), 3 + n)
        admin(self.base, "reset")
        self.assertEqual(admin(self.base, "stats")["token_calls"], [])


class TestRegisteredRedirect(StrictCase):
    """Norwegian providers want a pre-registered exact redirect URI (fixed loopback port)."""
    profile = "generic"
    extra_args = ("--redirect-uri", REDIRECT, "--client-secret", "pw", "--no-iss-parameter")

    def setUp(self):
        admin(self.base, "reset")

    def test_exact_redirect_and_secret(self):
        ctx = self.login()
        self.assertNotIn("iss", ctx)
        self.assertEqual(self.exchange(ctx, client_secret="pw").status, 200)
        r, _ = self.authorize(redirect_uri="http://127.0.0.1:40001/callback")
        self.assertEqual(r.status, 400)

    # the shared tests assume a public client with any loopback URI
    test_discovery = test_code_flow_with_pkce = test_code_is_one_time_and_replay_revokes = None
    test_pkce_is_required_s256_only = test_authorize_validation = test_revocation = None
    test_confidential_client = test_key_rotation = test_admin_user_claims_and_expiry = None
    test_login_page_and_form_post = test_signed_in_at_the_provider_logs_in_without_a_page = None


# ---------------------------------------------------------------------------------------
# lifecycle: parent death, idle exit
# ---------------------------------------------------------------------------------------

SPAWNER = r"""
import subprocess, sys
p = subprocess.Popen([sys.executable] + sys.argv[1:], stdout=subprocess.PIPE)
line = p.stdout.readline().decode().strip()
print(p.pid, line, flush=True)
import time; time.sleep(60)
"""


def children_of(pid: int) -> list[int]:
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(x) for x in f.read().split()]
    except FileNotFoundError:
        pass
    return out


class TestLifecycle(unittest.TestCase):
    def spawn_via_parent(self, script: Path, *args: str) -> tuple[subprocess.Popen, int, str]:
        parent = subprocess.Popen([PY, "-c", SPAWNER, str(script), *args],
                                  stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
        _procs.append(parent)
        self.addCleanup(stop, parent)
        ready, _, _ = select.select([parent.stdout], [], [], 30)
        self.assertTrue(ready, "spawner gave no line")
        pid, word, base = parent.stdout.readline().decode().split()
        self.assertEqual(word, "READY")
        return parent, int(pid), base

    def test_strict_exits_when_parent_dies(self):
        parent, pid, base = self.spawn_via_parent(STRICT, "--profile", "vipps")
        self.assertEqual(request("GET", base + "/jwks").status, 200)
        parent.send_signal(signal.SIGKILL)
        parent.wait(5)
        self.assertTrue(wait_gone(pid, 5), "strict provider outlived its parent")

    def test_mock_exits_when_parent_dies(self):
        parent, pid, base = self.spawn_via_parent(MOCK)
        mock_children = children_of(pid)
        self.assertEqual(len(mock_children), 1)
        self.assertEqual(request("GET", base + "/jwks").status, 200)
        parent.send_signal(signal.SIGKILL)
        parent.wait(5)
        self.assertTrue(wait_gone(pid, 8), "mock wrapper outlived its parent")
        self.assertTrue(wait_gone(mock_children[0], 8), "oidc-provider-mock outlived the wrapper")

    def test_mock_dies_with_sigkilled_wrapper(self):
        p, base = start(MOCK)
        self.addCleanup(stop, p)
        kids = children_of(p.pid)
        self.assertEqual(len(kids), 1)
        p.kill()
        p.wait(5)
        self.assertTrue(wait_gone(kids[0], 5), "PR_SET_PDEATHSIG did not stop the mock")

    def test_idle_exit(self):
        p, base = start(STRICT, "--idle-exit", "1")
        self.addCleanup(stop, p)
        self.assertEqual(request("GET", base + "/jwks").status, 200)
        self.assertEqual(p.wait(5), 0)


# ---------------------------------------------------------------------------------------
# oidc-provider-mock end to end
# ---------------------------------------------------------------------------------------


class TestOidcProviderMock(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.proc, cls.base = start(MOCK, "--idle-exit", "120", "--",
                                   "--user-claims", json.dumps({"sub": "kari", "name": "Kari Nordmann",
                                                                "nin": "15838512329"}))

    @classmethod
    def tearDownClass(cls):
        stop(cls.proc)

    def login(self, sub="kari", scope="openid profile"):
        verifier = secrets.token_urlsafe(48)
        params = {"client_id": CLIENT_ID, "redirect_uri": REDIRECT, "response_type": "code",
                  "scope": scope, "state": "st-" + secrets.token_hex(4), "nonce": "n-" + secrets.token_hex(4),
                  "code_challenge": b64u(hashlib.sha256(verifier.encode()).digest()),
                  "code_challenge_method": "S256"}
        d = request("GET", f"{self.base}/.well-known/openid-configuration").json()
        r = request("POST", d["authorization_endpoint"] + "?" + urlencode(params), form={"sub": sub})
        self.assertEqual(r.status, 302, r.body[:300])
        q = r.redirect_params()
        self.assertEqual(q["state"], params["state"])
        self.assertNotIn("iss", q)  # no RFC 9207
        return d, params, verifier, q["code"]

    def test_end_to_end(self):
        d, params, verifier, code = self.login()
        self.assertEqual(d["issuer"], self.base)
        self.assertNotIn("revocation_endpoint", d)
        self.assertNotIn("code_challenge_methods_supported", d)
        form = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT,
                "code_verifier": verifier}
        # a public client is refused: the mock wants a (any) secret
        r = request("POST", d["token_endpoint"], form={**form, "client_id": CLIENT_ID})
        self.assertEqual(r.status, 401)
        self.assertEqual(r.json()["error"], "invalid_client")
        r = request("POST", d["token_endpoint"], form=form, headers=basic(CLIENT_ID, "anything"))
        self.assertEqual(r.status, 200, r.body)
        tok = r.json()
        header = jwt.get_unverified_header(tok["id_token"])
        self.assertNotIn("kid", header)  # surprising but true: use the single JWKS key
        keys = request("GET", d["jwks_uri"]).json()["keys"]
        self.assertEqual(len(keys), 1)
        claims = jwt.decode(tok["id_token"], jwt.PyJWK(keys[0]).key, algorithms=["RS256"],
                            audience=CLIENT_ID, issuer=self.base)
        self.assertEqual(claims["sub"], "kari")
        self.assertEqual(claims["nonce"], params["nonce"])
        self.assertEqual(claims["aud"], [CLIENT_ID])
        self.assertNotIn("azp", claims)
        self.assertEqual(claims["nin"], "15838512329")  # custom claims in the ID token too
        u = request("GET", d["userinfo_endpoint"], headers={"Authorization": "Bearer " + tok["access_token"]})
        self.assertEqual(u.json()["name"], "Kari Nordmann")
        # refresh: Basic only, no rotation, no new id_token
        rf = {"grant_type": "refresh_token", "refresh_token": tok["refresh_token"]}
        r = request("POST", d["token_endpoint"], form={**rf, "client_id": CLIENT_ID, "client_secret": "x"})
        self.assertEqual(r.json()["error"], "invalid_client")
        for _ in range(2):
            r = request("POST", d["token_endpoint"], form=rf, headers=basic(CLIENT_ID, "x"))
            self.assertEqual(r.status, 200, r.body)
            self.assertNotIn("refresh_token", r.json())
            self.assertNotIn("id_token", r.json())
        r = request("POST", d["token_endpoint"], form={**rf, "scope": "openid offline_access"},
                    headers=basic(CLIENT_ID, "x"))
        self.assertEqual(r.json()["error"], "invalid_scope")

    def test_put_user_replaces_claims_and_code_post_auth(self):
        r = request("PUT", f"{self.base}/users/ola", body=json.dumps({"name": "Ola", "roles": ["mentor"]}).encode(),
                    headers={"Content-Type": "application/json"})
        self.assertEqual(r.status, 204)
        d, params, verifier, code = self.login("ola", scope="openid profile nin")
        r = request("POST", d["token_endpoint"], form={
            "grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT,
            "client_id": CLIENT_ID, "client_secret": "x"})  # client_secret_post works for codes
        self.assertEqual(r.status, 200, r.body)
        self.assertEqual(r.json()["scope"], "openid profile")  # unknown scope dropped
        u = request("GET", d["userinfo_endpoint"], headers={"Authorization": "Bearer " + r.json()["access_token"]}).json()
        self.assertEqual(u, {"sub": "ola", "name": "Ola", "roles": ["mentor"]})


# The shared base is not a test case of its own.
del StrictCase


if __name__ == "__main__":
    unittest.main()
