"""Tests of the reference backend (examples/backend/backend.py) against the strict provider.

    $(scripts/provider-venv) -m unittest discover -s Tests/backend -v

Two strict providers (profiles vipps and bankid, each with a client secret, so the backend
must authenticate as a confidential client) and the backend run as real processes on
127.0.0.1. The tests play vaultd: they build the authorization URL (PKCE S256, state,
nonce, test_user=...), read the code from the provider's redirect without following it,
and post it to the backend. Every process is started here and stopped at the end (each is
also told --watch-pid this process). Standard library only, like vaultd's side would be.
"""

from __future__ import annotations

import atexit
import base64
import hashlib
import json
import os
import re
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

ROOT = Path(__file__).resolve().parents[2]
# The providers' suite has the HTTP and process helpers; one copy of them.
sys.path.insert(0, str(ROOT / "Tests" / "providers"))
from test_providers import Resp, pid_alive, request, stop  # noqa: E402
BACKEND = ROOT / "examples" / "backend" / "backend.py"
STRICT = ROOT / "Tests" / "providers" / "strict_provider.py"
HTTP_TIMEOUT = 20
DAY = 86400
CLIENTS = {"vipps": ("org-members-vipps", "vipps-secret,with=odd:chars"),
           "bankid": ("org-members-bankid", "bankid-secret")}
SCOPES = {"vipps": "openid name nin phoneNumber", "bankid": "openid profile nnin_altsub"}

_procs: list[subprocess.Popen] = []
atexit.register(lambda: [p.kill() for p in _procs if p.poll() is None])


def cannot_run_here(reason: str) -> Exception:
    """A skip on a developer's machine, a failure under CI=true (where a skipped suite
    would let the run go green without having tested anything)."""
    if os.environ.get("CI") == "true":
        return AssertionError("CI=true, so this is a failure, not a skip: " + reason)
    return unittest.SkipTest(reason)


def venv_python() -> str:
    """An interpreter with the pinned packages: this one, or the repository's .venv."""
    for py in (sys.executable, str(ROOT / ".venv" / "bin" / "python")):
        if os.path.exists(py) and subprocess.run(
                [py, "-c", "import flask, jwt, httpx"], capture_output=True).returncode == 0:
            return py
    raise cannot_run_here("no Python with Flask, PyJWT and httpx: run scripts/provider-venv")


# ---------------------------------------------------------------------------------------
# processes and HTTP
# ---------------------------------------------------------------------------------------

PY = ""
TMP: Path   # set in setUpModule


def start(script: Path, *args: str, env: dict | None = None) -> tuple[subprocess.Popen, str]:
    """Starts a server, waits for its one READY line, returns (process, base URL). Its
    stderr goes to a file, p.log."""
    log = TMP / f"{script.stem}-{secrets.token_hex(4)}.log"
    with open(log, "wb") as err:
        watch = [] if "--watch-pid" in args else ["--watch-pid", str(os.getpid())]
        p = subprocess.Popen([PY, str(script), *args, *watch],
                             stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL,
                             env={**os.environ, **(env or {})})
    _procs.append(p)
    p.log = log  # type: ignore[attr-defined]
    ready, _, _ = select.select([p.stdout], [], [], 30)
    line = p.stdout.readline().decode() if ready else ""
    if not re.fullmatch(r"READY http://127\.0\.0\.1:\d+\n", line):
        stop(p)
        raise RuntimeError(f"{script.name} did not get ready: {line!r}\n{log.read_text()}")
    return p, line.split()[1]


def admin(base: str, path: str, body: dict | None = None, method: str | None = None):
    method = method or ("GET" if body is None else "POST")
    r = request(method, f"{base}/_admin/{path}", headers={"Content-Type": "application/json"},
                body=None if body is None else json.dumps(body).encode())
    assert r.status == 200, (path, r.status, r.body)
    return r.json()


def b64u(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jwt_claims(token: str) -> dict:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


# ---------------------------------------------------------------------------------------
# the shared processes
# ---------------------------------------------------------------------------------------

PROVIDERS: dict[str, tuple[subprocess.Popen, str]] = {}
BACKEND_PROC: subprocess.Popen
BASE = ""
DB = Path()
HANDED_OUT: list[str] = []   # every backend token and PKCE verifier the tests saw


def provider_args(name: str) -> list[str]:
    client_id, secret = CLIENTS[name]
    return ["--profile", name, "--client-id", client_id, "--client-secret", secret,
            "--client-auth", "client_secret_basic", "--idle-exit", "300",
            "--issued-log", str(TMP / f"{name}-issued.log")]


def upstream_arg(name: str, secret: str | None = None) -> str:
    client_id, real_secret = CLIENTS[name]
    return f"{name}={PROVIDERS[name][1]},{client_id},{secret or real_secret}"


def start_backend(*extra: str) -> tuple[subprocess.Popen, str]:
    # vipps' secret comes from the environment (and holds a comma), bankid's from argv.
    return start(BACKEND, "--upstream", upstream_arg("vipps", "env:TEST_VIPPS_SECRET"),
                 "--upstream", upstream_arg("bankid"), "--idle-exit", "300", *extra,
                 env={"TEST_VIPPS_SECRET": CLIENTS["vipps"][1]})


def setUpModule():
    global PY, TMP, BACKEND_PROC, BASE, DB
    PY = venv_python()
    TMP = Path(tempfile.mkdtemp(prefix="backend-test-"))
    try:
        for name in CLIENTS:
            PROVIDERS[name] = start(STRICT, *provider_args(name))
        DB = TMP / "backend.sqlite3"
        BACKEND_PROC, BASE = start_backend("--db", str(DB), "--rate-limit", "6000",
                                           "--issued-log", str(TMP / "backend-issued.log"))
    except BaseException:
        tearDownModule()   # unittest does not call it when setUpModule fails
        raise


def tearDownModule():
    for p in _procs:
        stop(p)
    shutil.rmtree(TMP, ignore_errors=True)


def sessions(base: str | None = None) -> list[dict]:
    return admin(base or BASE, "sessions")["sessions"]


def nins() -> dict[str, str]:
    users = admin(PROVIDERS["vipps"][1], "users")
    return {uid: u["nin"] for uid, u in users.items()}


# ---------------------------------------------------------------------------------------
# vaultd's side of the flow
# ---------------------------------------------------------------------------------------

class Case(unittest.TestCase):
    base = ""   # the backend under test; "" = the shared one

    def setUp(self):
        self.base = self.base or BASE
        for _, url in PROVIDERS.values():
            admin(url, "reset", {})
        if self.base == BASE:
            admin(BASE, "clock", {"offset": 0})
            admin(BASE, "behavior", {"down": False})

    def authorize(self, provider: str, user: str) -> dict:
        """The browser part: returns the code and what vaultd keeps for the exchange."""
        verifier = secrets.token_urlsafe(48)
        HANDED_OUT.append(verifier)
        ctx = {"provider": provider, "verifier": verifier, "state": secrets.token_urlsafe(32),
               "nonce": secrets.token_urlsafe(32),
               "redirect_uri": f"http://127.0.0.1:53682/oidc/{provider}"}
        q = {"response_type": "code", "client_id": CLIENTS[provider][0],
             "redirect_uri": ctx["redirect_uri"], "scope": SCOPES[provider],
             "state": ctx["state"], "nonce": ctx["nonce"], "code_challenge_method": "S256",
             "code_challenge": b64u(hashlib.sha256(verifier.encode()).digest()),
             "test_user": user}
        r = request("GET", f"{PROVIDERS[provider][1]}/authorize?{urlencode(q)}")
        self.assertEqual(r.status, 302, r.body)
        back = {k: v[0] for k, v in parse_qs(urlsplit(r.headers["Location"]).query).items()}
        self.assertEqual(back.get("state"), ctx["state"])
        ctx["code"] = back["code"]
        return ctx

    def post(self, provider: str, endpoint: str, form) -> Resp:
        r = request("POST", f"{self.base}/{provider}/{endpoint}", form=form)
        if r.status == 200 and r.body:
            body = r.json()
            HANDED_OUT.extend(body[k] for k in ("access_token", "refresh_token") if k in body)
        return r

    def exchange(self, ctx: dict, **override) -> Resp:
        form = {"grant_type": "authorization_code", "code": ctx["code"],
                "redirect_uri": ctx["redirect_uri"], "code_verifier": ctx["verifier"],
                "client_id": CLIENTS[ctx["provider"]][0], **override}
        return self.post(ctx["provider"], "token", form)

    def login(self, provider: str = "vipps", user: str = "kari") -> tuple[dict, dict]:
        """A login; ctx["session"] is the id of the session row it made (when the test
        controls are on)."""
        ctx = self.authorize(provider, user)
        before = {s["id"] for s in sessions()} if self.base == BASE else set()
        r = self.exchange(ctx)
        self.assertEqual(r.status, 200, r.body)
        if self.base == BASE:
            new = [s["id"] for s in sessions() if s["id"] not in before]
            self.assertEqual(len(new), 1)
            ctx["session"] = new[0]
        return ctx, r.json()

    def refresh(self, provider: str, rt: str, client_id: str | None = None) -> Resp:
        return self.post(provider, "token", {"grant_type": "refresh_token", "refresh_token": rt,
                                             "client_id": client_id or CLIENTS[provider][0]})

    def revoke(self, provider: str, token: str, hint: str = "refresh_token") -> Resp:
        return self.post(provider, "revoke", {"token": token, "token_type_hint": hint,
                                              "client_id": CLIENTS[provider][0]})

    def me(self, access_token: str) -> Resp:
        return request("GET", f"{self.base}/me", headers={"Authorization": f"Bearer {access_token}"})

    def advance(self, seconds: float) -> None:
        admin(self.base, "clock", {"advance": seconds})

    def session(self, session_id: str) -> dict:
        return next(s for s in sessions() if s["id"] == session_id)

    def assert_error(self, r: Resp, error: str, status: int = 400, description: str | None = None):
        self.assertEqual(r.status, status, r.body)
        body = r.json()
        self.assertEqual(body["error"], error, body)
        if description is not None:
            self.assertEqual(body.get("error_description"), description, body)
        self.assertEqual(r.headers.get("Cache-Control"), "no-store")


# ---------------------------------------------------------------------------------------
# the tests
# ---------------------------------------------------------------------------------------

class TestLogin(Case):
    def test_vipps_login_gives_backend_tokens_and_upstream_id_token(self):
        ctx = self.authorize("vipps", "kari")
        started = time.time()
        r = self.exchange(ctx)
        self.assertEqual(r.status, 200, r.body)
        self.assertEqual(r.headers.get("Cache-Control"), "no-store")
        self.assertEqual(r.headers.get_content_type(), "application/json")
        tok = r.json()
        self.assertEqual(set(tok), {"access_token", "token_type", "expires_in", "refresh_token",
                                    "refresh_expires_in", "id_token"})
        self.assertEqual(tok["token_type"], "Bearer")
        self.assertEqual(tok["expires_in"], 900)
        self.assertAlmostEqual(tok["refresh_expires_in"], 7 * DAY, delta=2)
        self.assertNotEqual(tok["access_token"], tok["refresh_token"])
        # The ID token is the provider's, unchanged, for this login (vaultd checks the nonce).
        claims = jwt_claims(tok["id_token"])
        self.assertEqual(claims["nonce"], ctx["nonce"])
        self.assertEqual(claims["iss"], PROVIDERS["vipps"][1])
        self.assertEqual(claims["aud"], CLIENTS["vipps"][0])
        issued = (TMP / "vipps-issued.log").read_text()
        self.assertIn(f"token\t{tok['id_token']}\n", issued)
        self.assertNotIn(tok["access_token"], issued)   # the backend's own, not Vipps'
        # The backend authenticated at Vipps as the confidential client.
        st = admin(PROVIDERS["vipps"][1], "stats")
        self.assertEqual(st["client_auth"], {"client_secret_basic": 1})
        self.assertEqual(st["requests"]["userinfo"], 1)   # Vipps: nin and name from userinfo

        me = self.me(tok["access_token"])
        self.assertEqual(me.status, 200, me.body)
        self.assertEqual(me.json(), {"sub": claims["sub"], "name": "Kari Nordmann",
                                     "provider": "vipps",
                                     "session_expires_at": me.json()["session_expires_at"]})
        self.assertAlmostEqual(me.json()["session_expires_at"], started + 7 * DAY, delta=5)
        self.assertNotIn(nins()["kari"].encode(), me.body)

    def test_bankid_subject_is_stable_across_logins(self):
        subjects = []
        for _ in range(2):
            ctx, tok = self.login("bankid", "ola")
            claims = jwt_claims(tok["id_token"])
            self.assertEqual(claims["nonce"], ctx["nonce"])
            me = self.me(tok["access_token"]).json()
            self.assertEqual(me["sub"], claims["bankid_altsub"])   # BankID's sub is per login
            self.assertEqual((me["name"], me["provider"]), ("Ola Nordmann", "bankid"))
            subjects.append((claims["sub"], me["sub"]))
        self.assertNotEqual(subjects[0][0], subjects[1][0])
        self.assertEqual(subjects[0][1], subjects[1][1])
        self.assertEqual(admin(PROVIDERS["bankid"][1], "stats")["requests"]["userinfo"], 0)

    def test_d_number_is_an_adult(self):
        self.assertTrue(nins()["dina"][0] in "4567")   # day + 40
        _, tok = self.login("bankid", "dina")
        self.assertEqual(self.me(tok["access_token"]).json()["name"], "Dina Dahl")

    def test_minor_is_refused_and_gets_no_session(self):
        before = sessions()
        refusals = admin(BASE, "stats")["refusals"].get("age", 0)
        for provider in ("vipps", "bankid"):
            ctx = self.authorize(provider, "ung")
            self.assert_error(self.exchange(ctx), "access_denied", description="age")
        self.assertEqual(sessions(), before)
        self.assertEqual(admin(BASE, "stats")["refusals"]["age"], refusals + 2)

    def test_wrong_client_id_is_invalid_client_and_the_code_is_not_spent(self):
        ctx = self.authorize("vipps", "kari")
        for wrong in ("someone-else", CLIENTS["bankid"][0]):
            r = self.exchange(ctx, client_id=wrong)
            self.assert_error(r, "invalid_client", 401)
        self.assertEqual(admin(PROVIDERS["vipps"][1], "stats")["token_grants"]["authorization_code"], 0)
        self.assertEqual(self.exchange(ctx).status, 200)   # never forwarded, still good

    def test_code_replay_and_upstream_errors(self):
        ctx, _ = self.login("vipps", "kari")
        self.assert_error(self.exchange(ctx), "invalid_grant")          # the upstream's word
        admin(PROVIDERS["vipps"][1], "behavior", {"endpoint_status": {"value": {"token": 503}, "times": 1}})
        self.assert_error(self.exchange(self.authorize("vipps", "kari")),
                          "temporarily_unavailable", 502)
        admin(PROVIDERS["vipps"][1], "behavior", {"drop_connection": {"value": "token", "times": 1}})
        self.assert_error(self.exchange(self.authorize("vipps", "kari")),
                          "temporarily_unavailable", 502)

    def test_bad_upstream_id_tokens_are_refused(self):
        before = len(sessions())
        for provider, behaviour in [("vipps", "wrong_aud"), ("vipps", "extra_aud"),
                                    ("vipps", "wrong_iss"), ("vipps", "alg_none"),
                                    ("vipps", "hs256_with_public_key"), ("bankid", "unknown_kid"),
                                    ("bankid", "expired_id_token"), ("bankid", "iat_in_future")]:
            with self.subTest(behaviour):
                admin(PROVIDERS[provider][1], "behavior", {behaviour: {"value": True, "times": 1}})
                r = self.exchange(self.authorize(provider, "kari"))
                self.assert_error(r, "invalid_grant")
                self.assertTrue(r.json()["error_description"].startswith("id_token: "), r.body)
        admin(PROVIDERS["vipps"][1], "behavior", {"userinfo_sub_mismatch": {"value": True, "times": 1}})
        self.assert_error(self.exchange(self.authorize("vipps", "kari")), "invalid_grant",
                          description="upstream userinfo: sub differs")
        admin(PROVIDERS["vipps"][1], "behavior", {"malformed_token_response": {"value": True, "times": 1}})
        self.assert_error(self.exchange(self.authorize("vipps", "kari")), "temporarily_unavailable", 502)
        self.assertEqual(len(sessions()), before)
        self.login("bankid", "kari")   # and the next, honest login works

    def test_malformed_requests(self):
        cid = CLIENTS["vipps"][0]
        self.assert_error(self.post("vipps", "token", {"grant_type": "password", "client_id": cid}),
                          "unsupported_grant_type")
        self.assert_error(self.post("vipps", "token", {"client_id": cid}), "invalid_request")
        self.assert_error(self.post("vipps", "token", {"grant_type": "authorization_code",
                                                       "client_id": cid}), "invalid_request")
        self.assert_error(self.post("vipps", "token", [("grant_type", "refresh_token"),
                                                       ("refresh_token", "a"), ("refresh_token", "b"),
                                                       ("client_id", cid)]), "invalid_request")
        r = request("POST", f"{BASE}/vipps/token", body=b'{"grant_type": "refresh_token"}',
                    headers={"Content-Type": "application/json"})
        self.assert_error(r, "invalid_request")
        self.assertEqual(request("POST", f"{BASE}/nope/token", form={"client_id": cid}).status, 404)
        r = request("GET", f"{BASE}/me")
        self.assertEqual(r.status, 401)
        self.assertEqual(self.me("not-a-token").headers["WWW-Authenticate"],
                         'Bearer error="invalid_token"')


class TestRefresh(Case):
    def test_refresh_rotates(self):
        ctx, tok = self.login("vipps", "kari")
        r = self.refresh("vipps", tok["refresh_token"])
        self.assertEqual(r.status, 200, r.body)
        self.assertEqual(r.headers.get("Cache-Control"), "no-store")
        new = r.json()
        self.assertEqual(set(new), {"access_token", "token_type", "expires_in", "refresh_token",
                                    "refresh_expires_in"})   # no id_token on refresh
        self.assertNotIn(new["refresh_token"], (tok["refresh_token"], tok["access_token"]))
        self.assertNotEqual(new["access_token"], tok["access_token"])
        self.assertEqual(self.me(new["access_token"]).status, 200)
        self.assertEqual(self.session(ctx["session"])["live_refresh_tokens"], 1)
        # Vipps issues no refresh tokens: the backend never asked it.
        self.assertEqual(admin(PROVIDERS["vipps"][1], "stats")["token_grants"]["refresh_token"], 0)

    def test_reuse_ends_the_whole_family(self):
        ctx, tok = self.login("bankid", "kari")
        reuse_before = admin(BASE, "stats")["reuse_detected"]
        rt0 = tok["refresh_token"]
        one = self.refresh("bankid", rt0).json()
        two = self.refresh("bankid", one["refresh_token"]).json()
        self.assertEqual(self.me(two["access_token"]).status, 200)
        self.assert_error(self.refresh("bankid", rt0), "invalid_grant", description="reused")
        # Everything from that login is dead: the newest refresh token and every access token.
        self.assert_error(self.refresh("bankid", two["refresh_token"]), "invalid_grant")
        for at in (tok["access_token"], one["access_token"], two["access_token"]):
            self.assertEqual(self.me(at).status, 401)
        row = self.session(ctx["session"])
        self.assertEqual((row["revoked_reason"], row["live_refresh_tokens"]), ("reused", 0))
        self.assertIsNotNone(row["revoked_at"])
        self.assertEqual(admin(BASE, "stats")["reuse_detected"], reuse_before + 1)

    def test_refresh_token_is_bound_to_its_client_and_upstream(self):
        _, tok = self.login("vipps", "ola")
        self.assert_error(self.refresh("vipps", tok["refresh_token"], client_id="other"),
                          "invalid_client", 401)
        # At the other upstream, with that upstream's own client id: not its token.
        self.assert_error(self.refresh("bankid", tok["refresh_token"]), "invalid_grant")
        self.assertEqual(self.refresh("vipps", tok["refresh_token"]).status, 200)

    def test_session_ends_after_seven_days(self):
        _, tok = self.login("vipps", "kari")
        self.advance(8 * DAY)
        self.assert_error(self.refresh("vipps", tok["refresh_token"]), "invalid_grant",
                          description="expired")
        self.assertEqual(self.me(tok["access_token"]).status, 401)

    def test_a_new_login_after_the_clock_moved_on_gets_a_fresh_session(self):
        self.advance(8 * DAY)   # the upstream's ID token is still checked on the real clock
        _, tok = self.login("bankid", "kari")
        self.assertEqual(tok["refresh_expires_in"], 7 * DAY)
        self.assertAlmostEqual(self.me(tok["access_token"]).json()["session_expires_at"],
                               time.time() + 15 * DAY, delta=5)

    def test_vipps_session_lasts_day_after_day_and_never_past_its_end(self):
        _, tok = self.login("vipps", "kari")
        end = self.me(tok["access_token"]).json()["session_expires_at"]
        for day in range(1, 7):
            self.advance(DAY)
            self.assertEqual(self.me(tok["access_token"]).status, 401)   # 900 s are long gone
            r = self.refresh("vipps", tok["refresh_token"])
            self.assertEqual(r.status, 200, (day, r.body))
            tok = r.json()
            self.assertAlmostEqual(tok["refresh_expires_in"], (7 - day) * DAY, delta=3)
            me = self.me(tok["access_token"])
            self.assertEqual(me.status, 200)
            self.assertEqual(me.json()["session_expires_at"], end)   # refreshing never extends
        self.advance(DAY - 300)   # 5 minutes before the end
        tok = self.refresh("vipps", tok["refresh_token"]).json()
        self.assertLessEqual(tok["refresh_expires_in"], 300)
        self.assertLessEqual(tok["expires_in"], 300)   # the access token stops with the session
        self.assertGreater(tok["expires_in"], 290)
        self.advance(301)
        self.assertEqual(self.me(tok["access_token"]).status, 401)
        self.assert_error(self.refresh("vipps", tok["refresh_token"]), "invalid_grant")


class TestRevoke(Case):
    def test_revoke_ends_the_session(self):
        ctx, tok = self.login("vipps", "dina")
        r = self.revoke("vipps", tok["refresh_token"])
        self.assertEqual((r.status, r.body), (200, b""))
        me = self.me(tok["access_token"])
        self.assertEqual(me.status, 401)
        self.assertEqual(me.headers["WWW-Authenticate"], 'Bearer error="invalid_token"')
        row = self.session(ctx["session"])
        self.assertIsNotNone(row["revoked_at"])
        self.assertEqual((row["revoked_reason"], row["live_refresh_tokens"]), ("logout", 0))
        self.assert_error(self.refresh("vipps", tok["refresh_token"]), "invalid_grant")

    def test_revoke_by_access_token_and_unknown_tokens(self):
        _, tok = self.login("bankid", "dina")
        self.assertEqual(self.revoke("bankid", tok["access_token"], "access_token").status, 200)
        self.assert_error(self.refresh("bankid", tok["refresh_token"]), "invalid_grant")
        self.assertEqual(self.revoke("bankid", "never-issued").status, 200)   # RFC 7009 2.2
        self.assert_error(self.post("bankid", "revoke", {"token": "x", "client_id": "other"}),
                          "invalid_client", 401)

    def test_backend_down_answers_503(self):
        _, tok = self.login("vipps", "kari")
        admin(BASE, "behavior", {"down": True})
        self.assert_error(self.refresh("vipps", tok["refresh_token"]), "temporarily_unavailable", 503)
        self.assert_error(self.exchange(self.authorize("vipps", "kari")), "temporarily_unavailable", 503)
        self.assert_error(self.revoke("vipps", tok["refresh_token"]), "temporarily_unavailable", 503)
        self.assertEqual(self.me(tok["access_token"]).status, 200)   # the API itself still answers
        admin(BASE, "behavior", {"down": False})
        self.assertEqual(self.refresh("vipps", tok["refresh_token"]).status, 200)


class TestAdmin(Case):
    def test_clock_and_proxied_requests(self):
        now = admin(BASE, "clock", {"advance": 0})["now"]
        self.assertAlmostEqual(now, time.time(), delta=2)
        self.assertAlmostEqual(admin(BASE, "clock", {"advance": DAY})["now"] - now, DAY, delta=1)
        # Behind a proxy every request comes from loopback: a forwarded one is refused.
        for header in ("X-Forwarded-For", "Forwarded"):
            r = request("GET", f"{BASE}/_admin/stats", headers={header: "203.0.113.9"})
            self.assertEqual(r.status, 404)
        stats = admin(BASE, "stats")
        self.assertEqual(set(stats), {"logins", "refreshes", "reuse_detected", "revocations",
                                      "refusals", "by_status"})


class TestNothingInClear(Case):
    def test_db_and_log_hold_no_token_code_verifier_or_national_id(self):
        _, tok = self.login("vipps", "ola")
        new = self.refresh("vipps", tok["refresh_token"]).json()
        _, btok = self.login("bankid", "kari")
        self.revoke("bankid", btok["refresh_token"])
        self.exchange(self.authorize("vipps", "ung"))
        secrets_seen = list(HANDED_OUT) + list(nins().values())
        for name in [*CLIENTS, "backend"]:   # every code, token and national ID handed out
            for line in (TMP / f"{name}-issued.log").read_text().splitlines():
                secrets_seen.append(line.split("\t", 1)[1])
        backend_issued = (TMP / "backend-issued.log").read_text()
        self.assertIn(f"token\t{new['access_token']}\n", backend_issued)
        self.assertIn(f"token\t{new['refresh_token']}\n", backend_issued)
        self.assertGreater(len(secrets_seen), 30)

        db = DB.read_bytes()
        journal = Path(str(DB) + "-journal")
        db += journal.read_bytes() if journal.exists() else b""
        log = BACKEND_PROC.log.read_bytes()   # type: ignore[attr-defined]
        for s in secrets_seen:
            self.assertNotIn(s.encode(), db)
            self.assertNotIn(s.encode(), log)
        # What is there instead: the hash, and one plain line per request.
        self.assertIn(hashlib.sha256(new["access_token"].encode()).hexdigest().encode(), db)
        self.assertIn(b"POST /vipps/token 200\n", log)
        self.assertIn(b"POST /bankid/revoke 200\n", log)
        self.assertIn(b"POST /vipps/token 400\n", log)


class TestSeparateBackends(Case):
    """Settings that need a backend of their own."""

    def test_member_records(self):
        members = TMP / "members.json"
        members.write_text(json.dumps([nins()["ola"]]))
        p, self.base = start_backend("--require-members", str(members), "--no-admin")
        self.addCleanup(stop, p)
        self.assert_error(self.exchange(self.authorize("vipps", "kari")), "access_denied",
                          description="not_member")
        self.assertEqual(self.exchange(self.authorize("vipps", "ola")).status, 200)
        # --no-admin: the test controls are not there.
        self.assertEqual(request("GET", f"{self.base}/_admin/sessions").status, 404)
        self.assertEqual(request("POST", f"{self.base}/_admin/clock", body=b'{"advance": 1}',
                                 headers={"Content-Type": "application/json"}).status, 404)

    def test_rotation_grace_lets_a_lost_answer_be_retried_and_nothing_more(self):
        """--rotation-grace: the owner whose answer was lost (vaultd killed after the
        backend rotated) may use the previous token again while its successor is unused;
        the successor then dies, and any later use of a rotated-away token is reuse."""
        p, self.base = start_backend("--rotation-grace", "30", "--no-admin")
        self.addCleanup(stop, p)
        _, tok = self.login("bankid", "kari")
        rt0 = tok["refresh_token"]
        lost = self.refresh("bankid", rt0).json()          # the answer vaultd never saw
        again = self.refresh("bankid", rt0)                 # after its restart
        self.assertEqual(again.status, 200, again.body)
        again = again.json()
        self.assertNotEqual(again["refresh_token"], lost["refresh_token"])
        self.assertEqual(self.me(again["access_token"]).status, 200)
        # The lost successor is dead, and its use now ends the family.
        self.assert_error(self.refresh("bankid", lost["refresh_token"]), "invalid_grant", description="reused")
        self.assert_error(self.refresh("bankid", again["refresh_token"]), "invalid_grant")

    def test_rotation_grace_never_covers_a_token_whose_successor_was_used(self):
        p, self.base = start_backend("--rotation-grace", "30", "--no-admin")
        self.addCleanup(stop, p)
        _, tok = self.login("bankid", "ola")
        rt0 = tok["refresh_token"]
        one = self.refresh("bankid", rt0).json()
        two = self.refresh("bankid", one["refresh_token"]).json()
        self.assert_error(self.refresh("bankid", rt0), "invalid_grant", description="reused")
        self.assert_error(self.refresh("bankid", two["refresh_token"]), "invalid_grant")

    def test_discovery_must_name_the_configured_issuer(self):
        p, base = start(BACKEND, "--upstream", upstream_arg("vipps").replace(",", "/,", 1))
        self.addCleanup(stop, p)
        r = request("POST", f"{base}/vipps/token", form={
            "grant_type": "authorization_code", "code": "c", "redirect_uri": "http://127.0.0.1:1/",
            "code_verifier": "v" * 43, "client_id": CLIENTS["vipps"][0]})
        self.assert_error(r, "temporarily_unavailable", 502,
                          description="vipps: discovery document unusable")

    def provider_id_token(self, provider: str, user: str) -> str:
        """What a gateway holding the organization's credentials would have: the
        provider's ID token for a login it redeemed itself."""
        from urllib.parse import quote_plus
        ctx = self.authorize(provider, user)
        client_id, secret = CLIENTS[provider]
        basic = base64.b64encode(f"{quote_plus(client_id)}:{quote_plus(secret)}".encode()).decode()
        r = request("POST", f"{PROVIDERS[provider][1]}/token", headers={"Authorization": f"Basic {basic}"},
                    form={"grant_type": "authorization_code", "code": ctx["code"],
                          "redirect_uri": ctx["redirect_uri"], "code_verifier": ctx["verifier"]})
        self.assertEqual(r.status, 200, r.body)
        return r.json()["id_token"]

    def token_exchange(self, provider: str, id_token: str, **override) -> Resp:
        form = {"grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
                "subject_token": id_token,
                "subject_token_type": "urn:ietf:params:oauth:token-type:id_token",
                "requested_token_type": "urn:ietf:params:oauth:token-type:refresh_token",
                "client_id": CLIENTS[provider][0], **override}
        return self.post(provider, "token", {k: v for k, v in form.items() if v is not None})

    def test_token_exchange_of_a_fresh_id_token(self):
        """RFC 8693 (docs/backend.md section 6): an ID token instead of the code, once."""
        id_token = self.provider_id_token("bankid", "ola")
        r = self.token_exchange("bankid", id_token)
        self.assertEqual(r.status, 200, r.body)
        body = r.json()
        self.assertEqual(body["issued_token_type"], "urn:ietf:params:oauth:token-type:access_token")
        self.assertTrue(body["refresh_token"])
        self.assertEqual(self.me(body["access_token"]).json()["name"], "Ola Nordmann")
        self.assertEqual(self.refresh("bankid", body["refresh_token"]).status, 200, "a session like any other")
        # The same ID token again (a replay): refused, and no second session.
        before = len(sessions())
        self.assert_error(self.token_exchange("bankid", id_token), "invalid_grant",
                          description="id_token: already exchanged")
        self.assertEqual(len(sessions()), before)
        # A tampered one, another token type, another requested type.
        head, payload, sig = self.provider_id_token("bankid", "ola").split(".")
        forged = jwt_claims(f"{head}.{payload}.{sig}")
        forged["bankid_altsub"] = "someone-else"
        forged_token = f"{head}.{b64u(json.dumps(forged).encode())}.{sig}"
        self.assert_error(self.token_exchange("bankid", forged_token), "invalid_grant")
        self.assert_error(self.token_exchange("bankid", id_token, subject_token_type="urn:ietf:params:oauth:token-type:jwt"),
                          "invalid_request")
        self.assert_error(self.token_exchange("bankid", self.provider_id_token("bankid", "ola"),
                                              requested_token_type="urn:ietf:params:oauth:token-type:id_token"),
                          "invalid_request")
        # Vipps gives the national ID only from userinfo, which needs the access token
        # this way never has: refused by the age rule's input, not let through.
        self.assert_error(self.token_exchange("vipps", self.provider_id_token("vipps", "kari")),
                          "access_denied", description="national_id")

    def test_private_key_jwt_at_the_upstream(self):
        """BankID's recommended client authentication: the backend signs a fresh assertion
        for each exchange (RFC 7523); the upstream knows only its public key."""
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        key = ec.generate_private_key(ec.SECP256R1())
        path = TMP / f"bankid-key-{secrets.token_hex(4)}.pem"
        path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
        os.chmod(path, 0o600)
        public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                               serialization.PublicFormat.SubjectPublicKeyInfo).decode()
        upstream = PROVIDERS["bankid"][1]
        admin(upstream, "config", {"client_public_key": public, "client_auth_methods": ["private_key_jwt"]})
        spec = f"bankid={upstream},{CLIENTS['bankid'][0]},private_key_jwt:{path}"
        p, self.base = start(BACKEND, "--upstream", spec)
        self.addCleanup(stop, p)
        ctx, tokens = self.login("bankid")
        self.assertEqual(self.me(tokens["access_token"]).status, 200)
        self.assertEqual(admin(upstream, "stats")["client_auth"], {"private_key_jwt": 1},
                         "the secret was not used, only the assertion")
        # A key file others can read is refused at start, as ssh refuses one.
        os.chmod(path, 0o640)
        with self.assertRaises(RuntimeError) as refused:
            start(BACKEND, "--upstream", spec)
        self.assertIn("readable by others; chmod 600 it", str(refused.exception))

    def test_rate_limit(self):
        p, base = start_backend("--rate-limit", "3")
        self.addCleanup(stop, p)
        form = {"grant_type": "password", "client_id": CLIENTS["vipps"][0]}
        codes = [request("POST", f"{base}/vipps/token", form=form) for _ in range(4)]
        self.assertEqual([r.status for r in codes], [400, 400, 400, 429])
        self.assertEqual(codes[-1].json()["error"], "temporarily_unavailable")
        self.assertGreaterEqual(int(codes[-1].headers["Retry-After"]), 1)

    def test_exits_with_watch_pid_idle_and_sigterm(self):
        sleeper = subprocess.Popen(["sleep", "60"])
        self.addCleanup(lambda: sleeper.poll() is None and (sleeper.kill(), sleeper.wait()))
        watched, _ = start_backend("--watch-pid", str(sleeper.pid))
        idle, base = start_backend("--idle-exit", "1")
        termed, _ = start_backend()
        for p in (watched, idle, termed):
            self.addCleanup(stop, p)
        sleeper.kill()
        sleeper.wait()
        self.assertEqual(watched.wait(5), 0)
        self.assertEqual(idle.wait(5), 0)
        termed.send_signal(signal.SIGTERM)
        self.assertEqual(termed.wait(5), 0)

    def test_exits_when_its_parent_dies(self):
        spawner = ("import subprocess, sys\n"
                   "p = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE)\n"
                   "print(p.pid, p.stdout.readline().decode().strip(), flush=True)\n"
                   "import time; time.sleep(60)\n")
        parent = subprocess.Popen(
            [PY, "-c", spawner, PY, str(BACKEND), "--upstream", upstream_arg("bankid")],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        _procs.append(parent)
        self.addCleanup(stop, parent)
        ready, _, _ = select.select([parent.stdout], [], [], 30)
        self.assertTrue(ready)
        pid, word, base = parent.stdout.readline().decode().split()
        self.assertEqual(word, "READY")
        self.assertEqual(request("GET", f"{base}/me").status, 401)
        parent.kill()
        parent.wait(5)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and pid_alive(int(pid)):
            time.sleep(0.05)
        self.assertFalse(pid_alive(int(pid)), "the backend outlived its parent")


def make_nin(day: int, month: int, yy: int, individual: int) -> str:
    """An 11-digit number with valid check digits (the first fitting individual number),
    made here independently of the backend's reading of it."""
    for ind in range(individual, 1000):
        d = [int(c) for c in f"{day:02d}{month:02d}{yy:02d}{ind:03d}"]
        k1 = (11 - sum(w * x for w, x in zip((3, 7, 6, 1, 8, 9, 4, 5, 2), d)) % 11) % 11
        k2 = (11 - sum(w * x for w, x in zip((5, 4, 3, 2, 7, 6, 5, 4, 3, 2), d + [k1])) % 11) % 11
        if k1 < 10 and k2 < 10:
            return "".join(map(str, d + [k1, k2]))
    raise ValueError("no individual number left")


def wrong_check_digit(nin: str) -> str:
    return nin[:10] + str((int(nin[10]) + 1) % 10)


class TestNationalID(unittest.TestCase):
    """The birth date and age rules, run in the backend's own interpreter."""

    def test_birth_dates_and_age(self):
        cases = {
            make_nin(17, 5, 60, 0): "1960-05-17",      # 000-499: 1900s
            make_nin(1, 1, 60, 600): "1860-01-01",     # 500-749 with 54-99: 1800s
            make_nin(3, 3, 10, 500): "2010-03-03",     # 500-999 with 00-39: 2000s
            make_nin(3, 3, 45, 900): "1945-03-03",     # 900-999 with 40-99: 1900s
            make_nin(3, 3, 45, 600): "ValueError",     # 500-899 with 40-53: no century
            make_nin(45, 7, 79, 345): "1979-07-05",    # D-number: day + 40
            make_nin(5, 47, 79, 345): "1979-07-05",    # H-number: month + 40
            make_nin(5, 87, 79, 345): "1979-07-05",    # synthetic test number: month + 80
            make_nin(29, 2, 1, 500): "ValueError",     # 29 February 2001 did not exist
            make_nin(29, 2, 8, 500): "2008-02-29",
            wrong_check_digit(make_nin(29, 2, 8, 500)): "ValueError",
            "1508851232": "ValueError",                # 10 digits
        }
        script = (
            "import json, sys\n"
            "from datetime import date, datetime\n"
            "from zoneinfo import ZoneInfo\n"
            f"sys.path.insert(0, {str(BACKEND.parent)!r})\n"
            "from backend import birthdate_from_nin, age\n"
            "out = {}\n"
            "for n in json.loads(sys.argv[1]):\n"
            "    try: out[n] = birthdate_from_nin(n).isoformat()\n"
            "    except ValueError: out[n] = 'ValueError'\n"
            "noon = lambda y, m, d: int(datetime(y, m, d, 12, tzinfo=ZoneInfo('Europe/Oslo')).timestamp())\n"
            "out['ages'] = [age(date(2008, 3, 1), noon(2026, 2, 28)), age(date(2008, 3, 1), noon(2026, 3, 1)),\n"
            "               age(date(2008, 2, 29), noon(2026, 2, 28)), age(date(2008, 2, 29), noon(2026, 3, 1))]\n"
            "print(json.dumps(out))\n")
        r = subprocess.run([PY, "-c", script, json.dumps(list(cases))], capture_output=True,
                           text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout)
        self.assertEqual(out.pop("ages"), [17, 18, 17, 18])
        self.assertEqual(out, cases)


if __name__ == "__main__":
    unittest.main()
