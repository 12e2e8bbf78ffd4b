"""The hostile-neighbour suite: each test plays an attacker on the same machine
against a real vaultd, at the sandbox, peer and socket boundaries that
docs/threat-model.md promises (issue 21). Each test but one failed on the code
before those promises were kept (b6531b8); the one, a sandboxed `allow_app`,
was refused already and is kept so that it stays so.

The attacker is mostly a Flatpak-like app: a bubblewrap sandbox with its own
/.flatpak-info (built by test_app_grants.TestAppGrants.sandbox_command), with
the grant dist/flatpak ships or, to show what that grant is for, the old
read-write one. vaultd's dialogs go to the scripted pinentry
(Tests/pinentry/fake-pinentry), which logs its DISPLAY, WAYLAND_DISPLAY and
arguments. Each test starts its own vaultd: several attacks succeed on old
code, and one that wiped or rewrote the vault must not decide the next test.

Run from the repository root (needs bwrap, Debian package bubblewrap; under
CI=true a missing bwrap is a failure):
    python3 -m unittest discover -s Tests/python -p 'test_hostile.py' -v
"""

import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from unittest import mock

import test_app_grants
import test_client
from test_client import FAR_FUTURE, IO_TIMEOUT, ISSUER, PIN, Prompter, cannot_run_here
from sessionvault import VaultClient, VaultError

ATTACKER = "org.example.Nabo"          # the hostile neighbour: a Flatpak app with no grants of its own
OWNER = test_app_grants.APP             # a Flatpak app the person allowed an account
ATTACKER_PIN = "590417"
VAULTD_DISPLAY = ":42"                  # vaultd's own graphical session
VAULTD_WAYLAND = "vaultd-wl"
HINTS = {"display": ":77", "wayland_display": "attacker-wl", "tty": "/dev/pts/77"}
MANIFEST = os.path.join(test_client.ROOT, "dist", "flatpak", "org.example.Aktivitetslogg.yml")
SANDBOX_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
FORK_TRIES = 60                         # the issue saw every account in 13-29 of 40

# One connection speaking the protocol line by line, as an attacker would:
# argv[2] is {"requests": [...], "answers": [...]}; each request gets the next id
# and is answered before the next is sent. Every frame read is kept, so a prompt
# that reached the app is seen even if the request then fails. A question is
# answered from "answers" (then cancelled). Prints one JSON line.
CONVERSATION = r"""
import json, socket, sys
path, spec = sys.argv[1], json.loads(sys.argv[2])
answers = list(spec.get("answers", []))
out = {"frames": [], "results": []}
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(20)
buf = b""
def frame():
    global buf
    while b"\n" not in buf:
        chunk = s.recv(65536)
        if not chunk:
            return None
        buf += chunk
    line, buf = buf.split(b"\n", 1)
    f = json.loads(line)
    out["frames"].append(f)
    return f
try:
    s.connect(path)
    for n, request in enumerate(spec["requests"], 1):
        s.sendall(json.dumps(dict(request, id=n)).encode() + b"\n")
        while True:
            f = frame()
            if f is None or (f.get("id") == n and "event" not in f):
                break
            p = f.get("prompt") or {}
            if f.get("event") == "prompt" and p.get("kind") not in ("message", "open_url"):
                a = {"id": "answer-%d" % len(out["frames"]), "op": "answer", "pid": p.get("pid")}
                if answers:
                    a["value"] = answers.pop(0)
                else:
                    a["cancel"] = True
                s.sendall(json.dumps(a).encode() + b"\n")
        out["results"].append(f if f is not None else {"closed": True})
        if f is None:
            break
except OSError as e:
    out["error"] = str(e)
print(json.dumps(out))
"""

# A sandboxed app that opens argv[2] connections and holds each open with
# `watch`; prints what each was answered (the watch's result, or the refusal
# vaultd sends unasked as it closes one, read before anything is sent: a line
# sent to a closed connection resets it), then keeps them all until its stdin closes.
HOLDER = r"""
import json, select, socket, sys
path, n = sys.argv[1], int(sys.argv[2])
held, said = [], []
for i in range(n):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(20)
    try:
        s.connect(path)
        if select.select([s], [], [], 0.3)[0]:
            said.append(json.loads(s.recv(65536).split(b"\n")[0]))
            continue
        s.sendall(b'{"id":1,"op":"hello","version":1,"client":"holder"}\n{"id":2,"op":"watch"}\n')
        buf = b""
        while buf.count(b"\n") < 2:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
        said.append(json.loads([line for line in buf.split(b"\n") if line][-1]))
    except (OSError, ValueError) as e:
        said.append({"failed": str(e)})
    held.append(s)
print(json.dumps(said), flush=True)
sys.stdin.read()
"""

# A sandboxed app whose process forks: the child connects and exits at once
# (before any byte is sent), the parent waits for it, then speaks on the
# inherited socket. argv[2]: the requests of each try; argv[3]: how many tries.
# Prints, per try, the frames the parent got (or what went wrong).
FORK_CONNECT_EXIT = r"""
import json, os, socket, sys
path, requests, tries = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
seen = []
for t in range(tries):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    pid = os.fork()
    if pid == 0:
        try:
            s.connect(path)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    s.settimeout(10)
    frames, buf = [], b""
    try:
        for n, request in enumerate(requests, 1):
            s.sendall(json.dumps(dict(request, id=n)).encode() + b"\n")
            while len(frames) < n:
                chunk = s.recv(65536)
                if not chunk:
                    raise EOFError
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    frames.append(json.loads(line))
    except (OSError, EOFError) as e:
        frames.append({"closed": repr(e)})
    s.close()
    seen.append(frames)
print(json.dumps(seen))
"""

# In a sandbox bound read-only to the socket's directory (or not): connect and
# speak, then try to rename, unlink and bind beside vaultd's socket. Prints
# what each did ("ok" or the error).
SOCKET_PROBE = r"""
import errno, json, os, socket, sys
path = sys.argv[1]
run = os.path.dirname(path)
out = {}
def attempt(name, fn):
    try:
        fn()
        out[name] = "ok"
    except OSError as e:
        out[name] = errno.errorcode.get(e.errno, str(e))
def talk():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(path)
    f = s.makefile("rwb")
    for n, op in enumerate(("hello", "status"), 1):
        f.write(json.dumps({"id": n, "op": op, "version": 1, "client": "probe"}).encode() + b"\n")
        f.flush()
        out[op] = json.loads(f.readline()).get("ok")
    s.close()
attempt("connect", talk)
attempt("rename", lambda: (os.rename(path, path + ".moved"), os.rename(path + ".moved", path)))
def bind():
    b = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    b.bind(os.path.join(run, "impostor.sock"))
    b.close()
    os.unlink(os.path.join(run, "impostor.sock"))
attempt("bind", bind)
attempt("unlink", lambda: os.unlink(path))
print(json.dumps(out))
"""

# The attacker with the old read-write grant of the socket's directory. On
# "swap" (stdin) it renames vault.sock aside, binds its own socket at the path
# and proxies every connection to the renamed real one, so a client that does
# not check would work as before. It says "swapped K INODE" (the inode of its
# socket file), "accepted N" per connection and "closed N BYTES" (bytes the
# client sent it) when one ends. It stops when its stdin closes.
IMPOSTOR = r"""
import os, select, socket, sys, threading
path = sys.argv[1]
lock = threading.Lock()
def say(*words):
    with lock:
        print(*words, flush=True)
count = [0]
def relay(conn, n, real):
    got = 0
    up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        up.connect(real)
        while True:
            ready, _, _ = select.select([conn, up], [], [], 30)
            if not ready:
                break
            done = False
            for s in ready:
                data = s.recv(65536)
                if not data:
                    done = True
                elif s is conn:
                    got += len(data)
                    up.sendall(data)
                else:
                    conn.sendall(data)
            if done:
                break
    except OSError:
        pass
    conn.close()
    up.close()
    say("closed", n, got)
def serve(listener, real):
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        with lock:
            count[0] += 1
            n = count[0]
        say("accepted", n)
        threading.Thread(target=relay, args=(conn, n, real), daemon=True).start()
swaps = 0
for line in sys.stdin:
    if line.strip() != "swap":
        continue
    swaps += 1
    real = "%s.real%d" % (path, swaps)
    try:
        os.rename(path, real)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen(16)
    except OSError as e:
        say("error", swaps, repr(e).replace(" ", "_"))
        continue
    threading.Thread(target=serve, args=(listener, real), daemon=True).start()
    say("swapped", swaps, os.stat(path).st_ino)
"""


def hello(interactive=False, **fields):
    return dict(op="hello", version=1, client="hostile-neighbour", lang="en", interactive=interactive, **fields)


def import_request(account, access_token):
    return dict(op="import", issuer=ISSUER, client_id="pytest-client", account=account, name="Nabo Naboen",
                refresh_token="RT-%s-secret" % account, access_token=access_token, expires_at=FAR_FUTURE,
                provider="bankid")


def outcome(frame):
    """("ok", result) or ("error", code) of one response frame."""
    if frame.get("ok") is True:
        return ("ok", frame.get("result"))
    return ("error", (frame.get("error") or {}).get("code", frame))


def secret_prompts(conversation):
    return [f for f in conversation["frames"] if f.get("event") == "prompt" and f["prompt"].get("kind") == "secret"]


def peer_pid(path):
    """The pid of whatever listens at path (SO_PEERCRED)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(IO_TIMEOUT)
        s.connect(path)
        return struct.unpack("3i", s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))[0]
    finally:
        s.close()


def shipped_grant():
    """The socket directory's grant in dist/flatpak's manifest: "ro" or "rw"."""
    with open(MANIFEST, encoding="utf-8") as f:
        grants = re.findall(r"^\s*-\s*--filesystem=xdg-run/sessionvault(:\w+)?\s*$", f.read(), re.M)
    if len(grants) != 1:
        raise AssertionError("%s should grant xdg-run/sessionvault once, found %r" % (MANIFEST, grants))
    return "ro" if grants[0] == ":ro" else "rw"


class HostileNeighbourTestCase(test_client.VaultdTestCase):
    """A fresh vaultd per test (an attack that works must not spoil the next
    test), its dialogs going to the scripted pinentry, its own display
    VAULTD_DISPLAY; and helpers to run code as a sandboxed app."""

    CONFIG = "prompt_timeout = 10\n" + test_client.FAST_PIN_CONFIG

    # Borrowed, not copied: they use self.fake_dir, self.fake_log,
    # self.fake_script and self.vaultd, which setUp provides.
    # (Through the module: a TestCase class named in this module would run here too.)
    sandbox_command = test_app_grants.TestAppGrants.sandbox_command
    dialogs = test_app_grants.TestAppGrants.dialogs
    vaultctl = test_app_grants.TestAppGrants.vaultctl
    grants = test_app_grants.TestAppGrants.grants
    script = test_client.FakePinentryTestCase.script

    @classmethod
    def setUpClass(cls):
        if not os.access(test_app_grants.BWRAP, os.X_OK):
            raise cannot_run_here("bwrap not found (apt-get install bubblewrap)")
        for path, env in ((test_client.VAULTD, "VAULTD"), (test_client.VAULTCTL, "VAULTCTL")):
            if not os.access(path, os.X_OK):
                raise cannot_run_here("%s not found at %s (set %s)" % (os.path.basename(path), path, env))

    def setUp(self):
        super().setUp()
        self.fake_dir = tempfile.mkdtemp(prefix="sv-hostile-")
        self.addCleanup(shutil.rmtree, self.fake_dir, True)
        self.fake_log = os.path.join(self.fake_dir, "log")
        self.fake_script = os.path.join(self.fake_dir, "script")
        env = {"FAKE_PINENTRY_LOG": self.fake_log, "FAKE_PINENTRY_SCRIPT": self.fake_script,
               "DISPLAY": VAULTD_DISPLAY, "WAYLAND_DISPLAY": VAULTD_WAYLAND}
        with mock.patch.dict(os.environ, env):
            self.vaultd = test_client.Vaultd('pinentry = "%s"\n%s' % (test_client.FAKE_PINENTRY, self.CONFIG))
        self.addCleanup(self.vaultd.stop)

    # -- the attacker's tools --------------------------------------------------

    def sandbox(self, app_id, *program, read_only=False):
        """sandbox_command, with the socket's directory bound read-only when asked."""
        cmd = self.sandbox_command(app_id, *program)
        if read_only:
            run_dir = os.path.dirname(self.vaultd.socket)
            at = [i for i in range(len(cmd) - 2) if cmd[i:i + 3] == ["--bind", run_dir, run_dir]]
            self.assertEqual(len(at), 1, cmd)
            cmd[at[0]] = "--ro-bind"
        return cmd

    def run_json(self, cmd):
        r = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=50, env=SANDBOX_ENV)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return json.loads(r.stdout.strip().splitlines()[-1])

    def converse(self, app_id, requests, answers=()):
        """Runs CONVERSATION as app_id in a sandbox, or with app_id None as this (unsandboxed) test's python."""
        spec = json.dumps({"requests": requests, "answers": list(answers)})
        program = ("-c", CONVERSATION, self.vaultd.socket, spec)
        if app_id is None:
            return self.run_json([sys.executable, *program])
        return self.run_json(self.sandbox(app_id, "/usr/bin/python3", *program))

    def attack(self, app_id, request, interactive=False, answers=(), **hello_fields):
        """One request after hello from a sandboxed app; (outcome, the whole conversation)."""
        said = self.converse(app_id, [hello(interactive, **hello_fields), request], answers)
        self.assertEqual(len(said["results"]), 2, said)
        self.assertEqual(outcome(said["results"][0])[0], "ok", said)
        return outcome(said["results"][1]), said

    def run_vaultctl(self, *args, socket_path=None, input=None):
        return subprocess.run([test_client.VAULTCTL, *args, "--socket", socket_path or self.vaultd.socket,
                               "--non-interactive"], input=input if input is not None else "", capture_output=True,
                              text=True, timeout=30, env=dict(os.environ, LANG="C.UTF-8"))

    # -- the person's side ---------------------------------------------------

    def owner_imports(self, account="kari", token="AT-kari-owner", allow=OWNER):
        """vaultctl (unsandboxed, at the person's terminal) imports an account and allows it to `allow`."""
        r = self.run_vaultctl("import", "--issuer", ISSUER, "--client-id", "pytest-client", "--account", account,
                              "--name", "Kari Nordmann", "--provider", "bankid",
                              input=json.dumps({"refresh_token": "RT-%s-owner" % account, "access_token": token,
                                                "expires_at": FAR_FUTURE}))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        if allow:
            self.vaultctl("apps", "allow", "flatpak:" + allow, account)

    def enroll_pin(self):
        c = self.client("pytest-person", interactive=True, on_prompt=Prompter(PIN, PIN))
        self.assertEqual(c.call("enroll", factor="pin")["state"], "enabled")

    def pin_state(self):
        return {f["factor"]: f["state"] for f in self.client().factors()}["pin"]

    def accounts(self):
        return sorted(a["account"] for a in json.loads(self.vaultctl("status", "--json"))["accounts"])

    def owner_token(self, account="kari"):
        result, said = self.attack(OWNER, {"op": "session", "account": account})
        self.assertEqual(result[0], "ok", said)
        return result[1]["access_token"]


class TestSandboxedAdminOps(HostileNeighbourTestCase):
    """Admin ops belong to the person: a sandboxed app gets `app_not_allowed`,
    whatever it sends (`confirm: true` included), and nothing changes."""

    def test_import_over_another_apps_account_is_refused(self):
        self.owner_imports()
        self.assertEqual(self.owner_token(), "AT-kari-owner")
        # A brand-new account is the app's own: that import still works.
        own, said = self.attack(ATTACKER, import_request("nabo-own", "AT-nabo-own"))
        self.assertEqual(own, ("ok", {"account": "nabo-own", "provider": "bankid"}), said)
        over, said = self.attack(ATTACKER, import_request("kari", "AT-attacker"))
        self.assertEqual(over, ("error", "app_not_allowed"), "a sandboxed app imported over another app's account")
        self.assertEqual(self.owner_token(), "AT-kari-owner", "the owner's session was replaced")

    def test_disable_pin_with_confirm_is_refused(self):
        self.enroll_pin()
        result, said = self.attack(ATTACKER, {"op": "disable", "factor": "pin", "confirm": True})
        self.assertEqual(result, ("error", "app_not_allowed"), said)
        self.assertEqual(self.pin_state(), "enabled", "a sandboxed app turned the PIN off")
        status = json.loads(self.vaultctl("status", "--json"))
        self.assertIn(("pin", "enabled"), [(f["factor"], f["state"]) for f in status["factors"]])

    def test_reset_with_confirm_is_refused(self):
        self.owner_imports()
        self.enroll_pin()
        result, said = self.attack(ATTACKER, {"op": "reset", "confirm": True})
        self.assertEqual(result, ("error", "app_not_allowed"), said)
        self.assertEqual(self.accounts(), ["kari"], "a sandboxed app wiped the sessions")
        self.assertEqual(self.pin_state(), "enabled")

    def test_enroll_pin_is_refused_and_never_asks_the_app(self):
        result, said = self.attack(ATTACKER, {"op": "enroll", "factor": "pin"}, interactive=True,
                                   answers=[ATTACKER_PIN] * 3)
        self.assertEqual(secret_prompts(said), [], "a PIN question was relayed to a sandboxed app")
        self.assertEqual(result, ("error", "app_not_allowed"), said)
        self.assertEqual(self.pin_state(), "not_enrolled", "a sandboxed app set the PIN")

    def test_reenroll_pin_is_refused_and_never_asks_the_app(self):
        self.enroll_pin()
        result, said = self.attack(ATTACKER, {"op": "reenroll", "factor": "pin"}, interactive=True,
                                   answers=[ATTACKER_PIN] * 3)
        self.assertEqual(secret_prompts(said), [], "a PIN question was relayed to a sandboxed app")
        self.assertEqual(result, ("error", "app_not_allowed"), said)
        # The person's PIN still opens the vault.
        self.client().lock()
        self.assertEqual(self.client(interactive=True, on_prompt=Prompter(PIN)).unlock("pin"), {"locked": False})

    def test_sync_conflicts_are_refused(self):
        result, said = self.attack(ATTACKER, {"op": "sync_conflicts"})
        self.assertEqual(result, ("error", "app_not_allowed"), said)

    def test_allow_app_is_refused(self):
        # Refused before issue 21 too; kept so that it stays so.
        self.owner_imports()
        result, said = self.attack(ATTACKER, {"op": "allow_app", "app": "flatpak:" + ATTACKER, "account": "kari"})
        self.assertEqual(result, ("error", "app_not_allowed"), said)
        self.assertNotIn(ATTACKER, self.grants())

    def test_audit_shows_only_the_apps_own_entries(self):
        self.owner_imports()
        self.assertEqual(self.owner_token(), "AT-kari-owner")
        self.attack(ATTACKER, import_request("nabo-own", "AT-nabo-own"))
        result, said = self.attack(ATTACKER, {"op": "audit", "limit": 1000})
        self.assertEqual(result[0], "ok", said)
        entries = result[1]["entries"]
        self.assertTrue(entries, "the app should see its own entries (its import)")
        foreign = [e for e in entries if (e.get("detail") or {}).get("app") not in (ATTACKER, "flatpak:" + ATTACKER)
                   or OWNER in json.dumps(e) or "kari" in json.dumps(e)]
        self.assertEqual(foreign[:3], [], "%d of %d audit entries are not the sandboxed app's own"
                         % (len(foreign), len(entries)))


class TestNoPinForSandboxedApps(HostileNeighbourTestCase):
    """A PIN is never relayed to a sandboxed app that did not ask for vaultd's own dialog."""

    def test_locked_vault_gives_a_sandboxed_interactive_app_no_pin_question(self):
        self.assertEqual(self.attack(ATTACKER, import_request("nabo-own", "AT-nabo-own"))[0][0], "ok")
        self.enroll_pin()
        self.client().lock()
        self.script("cancel", "cancel")   # were vaultd's own dialog shown, it would say so
        # Control: an unsandboxed interactive client is asked (so this test can see prompts).
        said = self.converse(None, [hello(interactive=True), {"op": "unlock", "factor": "pin"}])
        self.assertEqual(len(secret_prompts(said)), 1, said)
        self.assertEqual(outcome(said["results"][1]), ("error", "cancelled"), said)
        for request in ({"op": "session", "account": "nabo-own"}, {"op": "unlock"}):
            with self.subTest(op=request["op"]):
                result, said = self.attack(ATTACKER, request, interactive=True)
                self.assertEqual(secret_prompts(said), [], "the PIN question was relayed to a sandboxed app")
                self.assertEqual(result, ("error", "locked"), said)
        self.assertIs(self.client().status()["locked"], True)


class TestDialogDisplay(HostileNeighbourTestCase):
    """vaultd's dialogs go on the person's display, never on one a sandboxed app names."""

    def started(self):
        """Each dialog's START line (pid, DISPLAY, WAYLAND_DISPLAY, ARGS), in order."""
        with open(self.fake_log, encoding="utf-8") as f:
            return [line for line in f.read().splitlines() if line.startswith("START")]

    def test_a_sandboxed_apps_display_hints_are_ignored(self):
        self.owner_imports(allow=None)
        # Control: an unsandboxed client's hints are honoured.
        self.script("cancel")
        said = self.converse(None, [hello(prompter="vault", display=":78"), {"op": "session", "account": "kari"}])
        self.assertEqual(outcome(said["results"][1]), ("error", "app_not_allowed"), said)
        self.assertEqual(len(self.started()), 1, "no grant dialog for the unsandboxed client")
        self.assertIn(" DISPLAY=:78 ", self.started()[0])
        self.assertIn("--display :78", self.started()[0])

        self.script("cancel")
        result, said = self.attack(ATTACKER, {"op": "session", "account": "kari"}, prompter="vault", **HINTS)
        self.assertEqual(result, ("error", "app_not_allowed"), said)
        self.assertGreaterEqual(len(self.started()), 2, "no grant dialog for the sandboxed app")
        for start, lines in zip(self.started()[1:], self.dialogs()[1:]):
            self.assertEqual(re.search(r" DISPLAY=(\S*) ", start).group(1), VAULTD_DISPLAY, start)
            for hint in HINTS.values():
                self.assertNotIn(hint, "\n".join([start] + lines), "the dialog went where the sandboxed app said")


class TestUnlockDialogFatigue(HostileNeighbourTestCase):
    """Prompt fatigue: a sandboxed app that puts vaultd's unlock dialog back the
    moment the person closes it, until a tired person types the PIN to make it
    stop. After two closes that app raises none for two minutes."""

    def started(self):
        with open(self.fake_log, encoding="utf-8") as f:
            return [line for line in f.read().splitlines() if line.startswith("START")]

    def test_an_app_raising_the_unlock_dialog_in_a_loop_is_held_back_after_two_closes(self):
        self.enroll_pin()
        self.client().lock()
        open(self.fake_log, "w").close()
        self.script(*["cancel"] * 8)
        results = []
        for _ in range(6):
            said = self.converse(ATTACKER, [hello(True, prompter="vault"), {"op": "unlock"}])
            self.assertEqual(outcome(said["results"][0])[0], "ok", said)
            results.append(said["results"][1])
        codes = [outcome(frame) for frame in results]
        self.assertEqual(codes, [("error", "cancelled")] * 2 + [("error", "rate_limited")] * 4,
                         "dialogs shown: %d" % len(self.started()))
        self.assertEqual(len(self.started()), 2, "two dialogs, then none")
        held = results[-1]["error"]
        self.assertGreater(held.get("retry_after", 0), 100, held)
        self.assertIn("closed the unlock window", held.get("message", ""), held)
        # The person's own tool (unsandboxed) still gets the dialog.
        said = self.converse(None, [hello(True, prompter="vault"), {"op": "unlock"}])
        self.assertEqual(outcome(said["results"][1]), ("error", "cancelled"), said)
        self.assertEqual(len(self.started()), 3, "the person's own unlock was shown")
        self.assertIs(self.client().status()["locked"], True)


class TestLockInALoop(HostileNeighbourTestCase):
    """Prompt fatigue by another door: a sandboxed app that locks the vault the
    moment the person opens it has them unlock again and again, each dialog
    raised by the apps they use. Such an app locks an open vault once in ten
    minutes; the person's own tools always lock."""

    def test_an_app_locking_the_open_vault_in_a_loop_locks_it_once(self):
        self.enroll_pin()
        results = []
        for _ in range(4):
            said = self.converse(ATTACKER, [hello(), {"op": "lock"}])
            results.append(said["results"][1])
            # The person opens it again at once, as they would to use their apps.
            self.assertEqual(self.client(interactive=True, on_prompt=Prompter(PIN)).unlock("pin"), {"locked": False})
        codes = [outcome(frame) for frame in results]
        self.assertEqual(codes, [("ok", {"locked": True})] + [("error", "rate_limited")] * 3, results)
        held = results[-1]["error"]
        self.assertGreater(held.get("retry_after", 0), 500, held)
        self.assertIn("was not locked again", held.get("message", ""), held)
        self.assertIs(self.client().status()["locked"], False, "the vault stays open for the apps in use")
        # The person's own tool (unsandboxed) locks it whenever asked.
        r = self.run_vaultctl("lock")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIs(self.client().status()["locked"], True)


class TestConnectionsHeldOpen(HostileNeighbourTestCase):
    """A sandboxed app that holds connections open (`watch` keeps them for good)
    would shut every other app, and the person's settings and vaultctl, out of
    the vault until it exits: it holds at most a quarter of the cap."""

    CONFIG = "max_connections = 40\n" + HostileNeighbourTestCase.CONFIG

    def test_one_app_holding_connections_open_shuts_no_one_else_out(self):
        holder = subprocess.Popen(self.sandbox(ATTACKER, "/usr/bin/python3", "-c", HOLDER, self.vaultd.socket, "40"),
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=SANDBOX_ENV)
        self.addCleanup(holder.wait, 20)
        self.addCleanup(holder.stdin.close)
        said = json.loads(holder.stdout.readline())
        watching = [f for f in said if f.get("result", {}).get("watching") is True]
        refused = [f for f in said if (f.get("error") or {}).get("code") == "rate_limited"]
        self.assertEqual((len(watching), len(refused)), (10, 30), said[:12])
        self.assertIn("as many as one app may have", refused[0]["error"]["message"], refused[0])
        # The person's own tool and another app still get in while it holds them.
        r = self.run_vaultctl("status")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        result, said = self.attack(OWNER, {"op": "status"})
        self.assertEqual(result[0], "ok", said)


class TestAuditCheckInALoop(HostileNeighbourTestCase):
    """`audit` with `verify` walks the whole log: a sandboxed app asking in a
    loop would keep vaultd's cores busy. Once a minute for such an app."""

    def test_a_sandboxed_app_checks_the_audit_chain_once_a_minute(self):
        said = self.converse(ATTACKER, [hello()] + [{"op": "audit", "verify": True}] * 4)
        codes = [outcome(frame)[0] if frame.get("ok") else outcome(frame) for frame in said["results"][1:]]
        self.assertEqual(codes, ["ok"] + [("error", "rate_limited")] * 3, said["results"])
        self.assertGreater(said["results"][-1]["error"].get("retry_after", 0), 50, said["results"][-1])
        # The person's own tool checks it whenever asked.
        for _ in range(3):
            r = self.run_vaultctl("audit", "--verify")
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_a_sandboxed_app_reads_sixty_pages_of_the_log_a_minute(self):
        said = self.converse(ATTACKER, [hello()] + [{"op": "audit", "limit": 1000}] * 62)
        codes = [outcome(frame)[0] if frame.get("ok") else outcome(frame) for frame in said["results"][1:]]
        self.assertEqual(codes, ["ok"] * 60 + [("error", "rate_limited")] * 2, said["results"][-1])
        r = self.run_vaultctl("audit")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)


class TestPeerThatExits(HostileNeighbourTestCase):
    """An identity vaultd cannot read is trusted least: a sandboxed app whose
    forked child connected and exited sees no account and gets no admin op."""

    def fork_connect_exit(self, requests, tries):
        return self.run_json(self.sandbox(ATTACKER, "/usr/bin/python3", "-c", FORK_CONNECT_EXIT, self.vaultd.socket,
                                          json.dumps(requests), str(tries)))

    def test_fork_connect_exit_sees_no_account(self):
        with self.vaultd.client() as c:
            c.hello("pytest-person")
            for account in ("kari", "ola"):
                self.import_session(c, account)
        tries = self.fork_connect_exit([hello(), {"op": "status"}, {"op": "sessions"}], FORK_TRIES)
        self.assertEqual(len(tries), FORK_TRIES)
        saw = []
        for frames in tries:
            names = set()
            for f in frames:
                result = f.get("result") if f.get("ok") is True else {}
                names |= {a["account"] for a in result.get("accounts", []) + result.get("sessions", [])}
            if names:
                saw.append(sorted(names))
        self.assertEqual(saw[:1], [], "in %d of %d tries a forked, exited peer saw accounts" % (len(saw), FORK_TRIES))

    def test_fork_connect_exit_gets_no_admin_op(self):
        with self.vaultd.client() as c:
            c.hello("pytest-person")
            self.import_session(c, "kari")
        tries = self.fork_connect_exit([hello(), {"op": "reset", "confirm": True}], 10)
        results = [outcome(frames[1]) if len(frames) > 1 and "closed" not in frames[1] else frames for frames in tries]
        self.assertEqual([r for r in results if r != ("error", "app_not_allowed")], [])
        self.assertEqual(self.accounts(), ["kari"], "a forked, exited peer reset the vault")


class Impostor:
    """IMPOSTOR in a sandbox with the old read-write grant; what it has said so far."""

    def __init__(self, test):
        self.test = test
        self.path = test.vaultd.socket
        self.proc = subprocess.Popen(test.sandbox(ATTACKER, "/usr/bin/python3", "-c", IMPOSTOR, self.path),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=SANDBOX_ENV)
        test.addCleanup(self.stop)
        self.lines = []
        self.changed = threading.Condition()
        self.inodes = set()
        self.swaps = 0
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            with self.changed:
                self.lines.append(line.split())
                self.changed.notify_all()

    def wait_for(self, matches, timeout):
        """The first line said that matches, waiting up to timeout; None if none."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                found = [l for l in self.lines if matches(l)]
                if found or time.monotonic() >= deadline:
                    return found[0] if found else None
                self.changed.wait(max(0.0, deadline - time.monotonic()))

    def swap(self):
        """Has the impostor take the path; returns when it said it had."""
        self.swaps += 1
        self.proc.stdin.write("swap\n")
        self.proc.stdin.flush()
        said = self.wait_for(lambda l: l[0] in ("swapped", "error") and l[1] == str(self.swaps), 10)
        self.test.assertIsNotNone(said, "the impostor did not answer")
        self.test.assertEqual(said[0], "swapped", "the attacker could not swap the socket: %s" % said)
        self.inodes.add(int(said[2]))
        return time.monotonic()

    def holds_path(self):
        try:
            return os.stat(self.path).st_ino in self.inodes
        except FileNotFoundError:
            return False

    def accepted(self):
        return len([l for l in self.lines if l[0] == "accepted"])

    def took(self, before, timeout=1.0):
        """The id of the first connection accepted after `before` were, or None within timeout."""
        line = self.wait_for(lambda l: l[0] == "accepted" and int(l[1]) > before, timeout)
        return int(line[1]) if line else None

    def received(self, connection):
        """How many bytes the client of that connection sent the impostor."""
        line = self.wait_for(lambda l: l[:2] == ["closed", str(connection)], 10)
        self.test.assertIsNotNone(line, "the impostor's connection %d did not end" % connection)
        return int(line[2])

    def stop(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.reader.join(5)
        self.proc.stdout.close()


class TestSocketReplacement(HostileNeighbourTestCase):
    """The socket where a sandbox cannot replace it: dist/flatpak grants its
    directory read-only; with the old read-write grant, clients refuse an
    impostor and vaultd takes its path back."""

    def test_the_shipped_grant_connects_but_cannot_replace_the_socket(self):
        grant = shipped_grant()
        probe = self.run_json(self.sandbox(ATTACKER, "/usr/bin/python3", "-c", SOCKET_PROBE, self.vaultd.socket,
                                           read_only=grant == "ro"))
        self.assertEqual(grant, "ro", "dist/flatpak grants the socket's directory read-write; the probe: %s" % probe)
        self.assertEqual((probe["connect"], probe.get("hello"), probe.get("status")), ("ok", True, True), probe)
        for name in ("rename", "unlink", "bind"):
            self.assertNotEqual(probe[name], "ok", "a sandboxed app could %s in the socket's directory" % name)
        self.assertEqual(peer_pid(self.vaultd.socket), self.vaultd.proc.pid)

    def victim(self, impostor, client):
        """Runs client() with the impostor at the path; its outcome and the bytes it sent the impostor.
        vaultd may take the path back first (it checks about every second): then the try did not
        reach the impostor and is made again."""
        for _ in range(6):
            if not impostor.holds_path():
                impostor.swap()
            before = impostor.accepted()
            result = client()
            connection = impostor.took(before)
            if connection is not None:
                return result, impostor.received(connection)
        self.fail("vaultd took its path back before every one of 6 tries reached the impostor")

    def python_client(self):
        try:
            with VaultClient(self.vaultd.socket, timeout=IO_TIMEOUT) as c:
                c.hello("pytest-victim")
                return ("talked", c.status()["accounts"])
        except VaultError as e:
            return ("refused", e.code)

    def test_clients_refuse_a_sandboxed_impostor(self):
        self.owner_imports(allow=None)
        impostor = Impostor(self)
        result, sent = self.victim(impostor, self.python_client)
        self.assertEqual(result, ("refused", "foreign_server"), "the Python client talked to a sandboxed impostor")
        self.assertEqual(sent, 0, "the Python client sent the impostor %d bytes" % sent)
        r, sent = self.victim(impostor, lambda: self.run_vaultctl("status"))
        self.assertNotEqual(r.returncode, 0, "vaultctl talked to a sandboxed impostor:\n" + r.stdout)
        self.assertGreaterEqual(len((r.stderr + r.stdout).split()), 5, "vaultctl should say why: %r" % r.stderr)
        self.assertEqual(sent, 0, "vaultctl sent the impostor %d bytes" % sent)

    def test_vaultd_takes_its_socket_path_back(self):
        self.owner_imports(allow=None)
        impostor = Impostor(self)
        swapped = impostor.swap()
        while impostor.holds_path() and time.monotonic() < swapped + 6:   # promised: 5 s; 1 s for a loaded machine
            time.sleep(0.05)
        self.assertFalse(impostor.holds_path(), "vaultd did not take its socket path back within 6 s")
        self.assertEqual(peer_pid(self.vaultd.socket), self.vaultd.proc.pid)
        before = impostor.accepted()
        r = self.run_vaultctl("status", "--json")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual([a["account"] for a in json.loads(r.stdout)["accounts"]], ["kari"])
        self.assertEqual(self.python_client()[0], "talked")
        self.assertIsNone(impostor.took(before, 0.5), "the impostor still gets connections")


if __name__ == "__main__":
    unittest.main()
