"""Tests for the Python client against a real vaultd.

Run from the repository root:
    python3 -m unittest discover -s Tests/python -v
Environment: VAULTD (default .build/debug/vaultd), VAULTCTL (default .build/debug/vaultctl).
Each class starts its own vaultd in a temporary directory and stops it at the end.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
from unittest import mock

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLIENT_DIR = os.path.join(ROOT, "clients", "python")
sys.path.insert(0, CLIENT_DIR)

from sessionvault import VaultClient, VaultConnectionError, VaultError, default_socket_path  # noqa: E402

VAULTD = os.environ.get("VAULTD") or os.path.join(ROOT, ".build", "debug", "vaultd")
VAULTCTL = os.environ.get("VAULTCTL") or os.path.join(ROOT, ".build", "debug", "vaultctl")
EXAMPLE_APP = os.path.join(CLIENT_DIR, "example_app.py")
# clients/swift's example-app, built against a local tag by scripts/build-swift-example
# (scripts/test builds it and sets this).
SWIFT_EXAMPLE_APP = os.environ.get("SWIFT_EXAMPLE_APP") or os.path.join(ROOT, ".build", "swift-example", "example-app")

IO_TIMEOUT = 10.0  # every socket read
START_TIMEOUT = 20.0  # vaultd accepting connections
STOP_TIMEOUT = 10.0  # vaultd exiting after SIGTERM
TEST_TIMEOUT = 60  # hard bound for one test (SIGALRM)

ISSUER = "https://login.example.org"
FAR_FUTURE = 4_102_444_800  # 2100-01-01
PIN = "482915"
FAST_PIN_CONFIG = "[pin]\nargon_memory_mib = 64\nfirst_delay = 1\nfree_attempts = 3\n"


def cannot_run_here(reason):
    """What a test raises when something it needs is missing: a skip on a
    developer's machine, a failure under CI=true, where a skipped suite would let
    the run go green without having tested anything."""
    if os.environ.get("CI") == "true":
        return AssertionError("CI=true, so this is a failure, not a skip: " + reason)
    return unittest.SkipTest(reason)


class Vaultd:
    """A private vaultd in a temporary directory."""

    def __init__(self, config="", movable_clock=False):
        self.dir = tempfile.mkdtemp(prefix="sv-pytest-")
        self.clock_path = os.path.join(self.dir, "clock-offset")
        self.socket = os.path.join(self.dir, "run", "vault.sock")
        self.log_path = os.path.join(self.dir, "vaultd.log")
        config_path = os.path.join(self.dir, "config.toml")
        with open(config_path, "w") as f:
            f.write(config)
        self.log = open(self.log_path, "wb")
        env = dict(os.environ)
        env.pop("SESSIONVAULT_SOCKET", None)
        env.pop("SESSIONVAULT_DATA_DIR", None)
        # The organization's file: none (never the machine's /etc/sessionvault).
        env["SESSIONVAULT_SYSTEM_CONFIG"] = os.path.join(self.dir, "system-config.toml")
        if movable_clock:
            # A debug build's clock, moved by `move_clock` (DaemonClock.swift).
            env["SESSIONVAULT_TEST_CLOCK_FILE"] = self.clock_path
        try:
            self.proc = subprocess.Popen(
                [VAULTD, "--keyring=file", "--data-dir", os.path.join(self.dir, "data"),
                 "--socket", self.socket, "--config", config_path],
                stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        except BaseException:
            self.log.close()
            shutil.rmtree(self.dir, ignore_errors=True)
            raise
        try:
            self._wait_ready()
        except BaseException:
            self.stop(check=False)
            raise

    def move_clock(self, seconds):
        """Moves vaultd's clock forward (a debug build started with movable_clock)."""
        try:
            with open(self.clock_path) as f:
                now = int(f.read().strip() or 0)
        except FileNotFoundError:
            now = 0
        with open(self.clock_path, "w") as f:
            f.write("%d\n" % (now + seconds))

    def _wait_ready(self):
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("vaultd exited with %s:\n%s" % (self.proc.returncode, self.read_log()))
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.settimeout(1)
                s.connect(self.socket)
                return
            except OSError:
                time.sleep(0.05)
            finally:
                s.close()
        raise RuntimeError("vaultd did not accept connections in %ss:\n%s" % (START_TIMEOUT, self.read_log()))

    def read_log(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def stop(self, check=True):
        """SIGTERM and wait (SIGKILL if it hangs); remove the directory."""
        problem = None
        try:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(timeout=STOP_TIMEOUT)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(timeout=STOP_TIMEOUT)
                    problem = "vaultd did not stop within %ss of SIGTERM" % STOP_TIMEOUT
            if problem is None and self.proc.returncode != 0:
                problem = "vaultd exited with %s after SIGTERM" % self.proc.returncode
            if problem:
                problem += ":\n" + self.read_log()[-3000:]
        finally:
            self.log.close()
            shutil.rmtree(self.dir, ignore_errors=True)
        if check and problem:
            raise AssertionError(problem)

    def client(self, **kw):
        kw.setdefault("timeout", IO_TIMEOUT)
        return VaultClient(self.socket, **kw)


class RawConnection:
    """A bare socket that reads whole lines, for framing tests."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(IO_TIMEOUT)
        self.sock.connect(path)
        self.buffer = b""

    def send(self, data):
        self.sock.sendall(data)

    def frame(self, timeout=IO_TIMEOUT):
        """The next frame as a dict; None at end of stream."""
        self.sock.settimeout(timeout)
        while b"\n" not in self.buffer:
            try:
                chunk = self.sock.recv(65536)
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                if self.buffer:
                    raise AssertionError("partial frame before end of stream: %r" % self.buffer[:200])
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def close(self):
        self.sock.close()


class Prompter:
    """An on_prompt callback: answers questions from a list, records every prompt."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.seen = []

    def __call__(self, prompt):
        self.seen.append(prompt)
        if prompt["kind"] == "message":
            return None
        if not self.answers:
            raise AssertionError("unexpected question: %r" % prompt)
        return self.answers.pop(0)

    @property
    def kinds(self):
        return [p["kind"] for p in self.seen]


class VaultdTestCase(unittest.TestCase):
    CONFIG = ""
    MOVABLE_CLOCK = False

    @classmethod
    def setUpClass(cls):
        if not os.access(VAULTD, os.X_OK):
            raise cannot_run_here("vaultd not found at %s (set VAULTD)" % VAULTD)
        cls.vaultd = Vaultd(cls.CONFIG, movable_clock=cls.MOVABLE_CLOCK)
        cls.addClassCleanup(cls.vaultd.stop)

    def setUp(self):
        def timed_out(signum, frame):
            raise TimeoutError("test took longer than %ss" % TEST_TIMEOUT)
        previous = signal.signal(signal.SIGALRM, timed_out)
        signal.alarm(TEST_TIMEOUT)

        def disarm():
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)
        self.addCleanup(disarm)

    def client(self, name="pytest", lang="en", interactive=False, on_prompt=None):
        c = self.vaultd.client(on_prompt=on_prompt)
        self.addCleanup(c.close)
        c.hello(name, lang=lang, interactive=interactive)
        return c

    def raw(self):
        r = RawConnection(self.vaultd.socket)
        self.addCleanup(r.close)
        return r

    def import_session(self, client, account, name=None, access_token=None, refresh_token=None):
        fields = dict(issuer=ISSUER, client_id="pytest-client", account=account,
                      refresh_token=refresh_token or "RT-%s-secret" % account,
                      access_token=access_token or "AT-%s" % account, expires_at=FAR_FUTURE)
        if name:
            fields["name"] = name
        return client.call("import", **fields)

    def run_example_app(self, *args, env_extra=None, swift=False):
        """The Python example app, or with ``swift`` the Swift one (clients/swift)."""
        if swift and not os.access(SWIFT_EXAMPLE_APP, os.X_OK):
            raise cannot_run_here("the Swift example app is not built at %s (scripts/build-swift-example)"
                                  % SWIFT_EXAMPLE_APP)
        env = dict(os.environ, SESSIONVAULT_SOCKET=self.vaultd.socket, LANG="C.UTF-8")
        env.pop("LC_ALL", None)
        env.pop("LC_MESSAGES", None)
        env.update(env_extra or {})
        command = [SWIFT_EXAMPLE_APP] if swift else [sys.executable, EXAMPLE_APP]
        return subprocess.run(command + list(args), env=env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=30)


class TestSocketPath(unittest.TestCase):
    """Default socket path resolution (no vaultd needed)."""

    def test_explicit_env_wins(self):
        with mock.patch.dict(os.environ, {"SESSIONVAULT_SOCKET": "/x/y.sock", "XDG_RUNTIME_DIR": "/run/user/7"}):
            self.assertEqual(default_socket_path(), "/x/y.sock")

    def test_xdg_runtime_dir(self):
        with mock.patch.dict(os.environ, {"SESSIONVAULT_SOCKET": "", "XDG_RUNTIME_DIR": "/run/user/7"}):
            self.assertEqual(default_socket_path(), "/run/user/7/sessionvault/vault.sock")

    def test_tmp_fallback(self):
        with mock.patch.dict(os.environ, {}, clear=True):
            self.assertEqual(default_socket_path(), "/tmp/sessionvault-%d/vault.sock" % os.getuid())

    def test_missing_socket_is_a_clear_error(self):
        d = tempfile.mkdtemp(prefix="sv-pytest-")
        try:
            path = os.path.join(d, "nothing.sock")
            with self.assertRaises(VaultConnectionError) as cm:
                VaultClient(path, timeout=IO_TIMEOUT)
            self.assertEqual(cm.exception.code, "unavailable")
            self.assertIn(path, cm.exception.message)
            env = dict(os.environ, SESSIONVAULT_SOCKET=path)
            r = subprocess.run([sys.executable, EXAMPLE_APP], env=env, stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 1)
            self.assertIn("vaultd", r.stdout)
        finally:
            shutil.rmtree(d, ignore_errors=True)


# A stand-in for vaultd run as another user: listens at argv[1], answers every
# line with a success (so a client that does not check would carry on), and
# prints as JSON what it received once the client has gone.
FOREIGN_SERVER = r"""
import json, os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1]); os.chmod(sys.argv[1], 0o666); s.listen(4)
print("ready", flush=True)
s.settimeout(10)
conn, _ = s.accept(); conn.settimeout(5)
data = b""
try:
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
        for line in chunk.split(b"\n")[:-1]:
            conn.sendall(b'{"id":1,"ok":true,"result":{"version":1,"server":"fake","locked":false}}\n')
except OSError:
    pass
print(json.dumps({"received": data.decode("utf-8", "replace")}), flush=True)
"""


def start_foreign_server(test):
    """Runs FOREIGN_SERVER as uid 65534 on a socket in a 0777 temp dir; returns (path, process)."""
    if os.getuid() != 0:
        test.skipTest("needs root to run a server as uid 65534")
    if not (os.access("/usr/bin/setpriv", os.X_OK) and os.access("/usr/bin/python3", os.X_OK)):
        if os.environ.get("CI") == "true":
            test.fail("needs /usr/bin/setpriv and /usr/bin/python3")
        test.skipTest("needs /usr/bin/setpriv and /usr/bin/python3")
    d = tempfile.mkdtemp(prefix="sv-pytest-foreign-")
    test.addCleanup(shutil.rmtree, d, True)
    os.chmod(d, 0o777)
    path = os.path.join(d, "vault.sock")
    proc = subprocess.Popen(["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                             "/usr/bin/python3", "-c", FOREIGN_SERVER, path],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={"PATH": "/usr/bin:/bin"})
    test.addCleanup(lambda: proc.poll() is not None or proc.kill())
    test.assertEqual(proc.stdout.readline().strip(), "ready", proc.stderr.read() if proc.poll() is not None else "")
    test.assertEqual(os.stat(path).st_uid, 65534)
    return path, proc


class TestForeignServer(unittest.TestCase):
    """A socket served by another uid is refused before a byte is sent (SO_PEERCRED)."""

    def test_client_refuses_a_server_of_another_uid(self):
        path, proc = start_foreign_server(self)
        with self.assertRaises(VaultConnectionError) as cm:
            with VaultClient(path, timeout=IO_TIMEOUT) as c:
                c.hello("pytest")
        self.assertEqual(cm.exception.code, "foreign_server")
        self.assertIn(path, cm.exception.message)
        out, _ = proc.communicate(timeout=30)
        self.assertEqual(json.loads(out.strip().splitlines()[-1])["received"], "", "the client sent data to it")


BWRAP = shutil.which("bwrap") or "/usr/bin/bwrap"


def start_sandboxed_server(test, sandbox=True):
    """Runs FOREIGN_SERVER as us, in a bubblewrap sandbox (its own root and pid
    namespace, as a Flatpak app has) unless ``sandbox`` is false; returns (path, process)."""
    if sandbox and not os.access(BWRAP, os.X_OK):
        raise cannot_run_here("bwrap not found (apt-get install bubblewrap)")
    d = tempfile.mkdtemp(prefix="sv-pytest-sandboxed-")
    test.addCleanup(shutil.rmtree, d, True)
    path = os.path.join(d, "vault.sock")
    program = ["/usr/bin/python3", "-c", FOREIGN_SERVER, path]
    if sandbox:
        program = [BWRAP, "--die-with-parent", "--unshare-pid", "--tmpfs", "/", "--ro-bind", "/usr", "/usr",
                   "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/bin", "/bin",
                   "--proc", "/proc", "--dev", "/dev", "--bind", d, d] + program
    proc = subprocess.Popen(program, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={"PATH": "/usr/bin:/bin"})
    test.addCleanup(lambda: proc.poll() is not None or proc.kill())
    ready = proc.stdout.readline().strip()
    if ready != "ready" and sandbox:
        proc.kill()
        raise cannot_run_here("bwrap could not start a sandbox here: %s" % proc.stderr.read().strip())
    test.assertEqual(ready, "ready")
    return path, proc


class TestSandboxedServer(unittest.TestCase):
    """A socket served from a sandbox (an app that put its own socket at vaultd's
    path) is refused before a byte is sent, though it runs as our uid: its
    /proc/PID/root is not our root directory."""

    def test_client_refuses_a_server_in_a_sandbox(self):
        path, proc = start_sandboxed_server(self)
        with self.assertRaises(VaultConnectionError) as cm:
            with VaultClient(path, timeout=IO_TIMEOUT) as c:
                c.hello("pytest")
        self.assertEqual(cm.exception.code, "foreign_server")
        self.assertIn(path, cm.exception.message)
        self.assertIn("sandbox", cm.exception.message)
        self.assertIn("log out and in again", cm.exception.message, "a next step without a terminal")
        out, _ = proc.communicate(timeout=30)
        self.assertEqual(json.loads(out.strip().splitlines()[-1])["received"], "", "the client sent data to it")

    def test_the_same_server_outside_a_sandbox_is_spoken_to(self):
        # The control: the refusal above is the sandbox's, not the stand-in's.
        path, proc = start_sandboxed_server(self, sandbox=False)
        with VaultClient(path, timeout=IO_TIMEOUT) as c:
            self.assertEqual(c.hello("pytest")["server"], "fake")
        out, _ = proc.communicate(timeout=30)
        self.assertIn("hello", json.loads(out.strip().splitlines()[-1])["received"])

    def test_a_sandbox_is_told_by_its_pid_namespace_too(self):
        # An impostor can make its root unreadable (PR_SET_DUMPABLE 0, against a
        # client without CAP_SYS_PTRACE); its pid namespace it cannot hide.
        import sessionvault
        path, proc = start_sandboxed_server(self)
        self.assertEqual(sessionvault._pid_namespace_depth(proc.pid), 1, "bwrap itself runs in ours")
        children = [int(p) for p in os.listdir("/proc") if p.isdigit() and self._parent(int(p)) == proc.pid]
        self.assertTrue(children, "the sandboxed server process")
        self.assertEqual(max(sessionvault._pid_namespace_depth(c) for c in children), 2)
        self.assertEqual(sessionvault._pid_namespace_depth(os.getpid()), 1)
        proc.kill()

    @staticmethod
    def _parent(pid):
        try:
            with open("/proc/%d/stat" % pid) as f:
                return int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return -1

    def test_what_cannot_be_told_is_allowed(self):
        import sessionvault
        self.assertFalse(sessionvault._runs_under_another_root(0), "pid 0: the server is outside our pid namespace")
        self.assertFalse(sessionvault._runs_under_another_root(os.getpid()), "our own root")
        with open("/proc/sys/kernel/pid_max") as f:
            unused = int(f.read()) + 1  # never a pid
        self.assertFalse(sessionvault._runs_under_another_root(unused), "no /proc entry: cannot tell")


class TestProtocol(VaultdTestCase):
    """Handshake, shapes and framing on a fresh vault."""

    def test_hello_fresh_vault(self):
        with self.vaultd.client() as c:
            result = c.hello("pytest")
        self.assertEqual(result["version"], 1)
        self.assertIs(result["locked"], False)
        self.assertIsInstance(result["server"], str)
        self.assertTrue(result["server"])

    def test_greet_goes_with_the_first_request_in_one_write(self):
        with self.vaultd.client() as c:
            writes = []
            send_line = c.send_line  # one sendall per call
            c.send_line = lambda line: (writes.append(line.encode() + b"\n"), send_line(line))[1]
            c.greet("pytest", lang="nb")
            self.assertIsNone(c.server, "nothing is sent before the first request")
            with self.assertRaises(VaultError) as e:
                c.call("frobnicate")
            self.assertEqual(len(writes), 1, "hello and the request in one write")
            self.assertEqual(writes[0].count(b"\n"), 2)
            self.assertEqual(c.server["version"], 1, "hello's answer was read")
            self.assertIn("Ukjent", e.exception.message, "the request was served in the hello's language")
            self.assertTrue(c.status()["factors"], "the connection goes on as after hello")

    def test_status_shape(self):
        status = self.client().status()
        self.assertIs(status["locked"], False)
        self.assertIsInstance(status["accounts"], list)
        self.assertIsInstance(status["factors"], list)
        self.assertTrue(status["factors"])
        for f in status["factors"]:
            self.assertEqual(set(f) - {"retry_after"}, {"factor", "state", "label"})
            self.assertIn(f["state"], ("enabled", "not_enrolled", "unavailable", "locked_out"))
            self.assertTrue(f["label"])
        pin = [f for f in status["factors"] if f["factor"] == "pin"]
        self.assertEqual(len(pin), 1)
        self.assertEqual(pin[0]["state"], "not_enrolled")

    def test_factors_convenience(self):
        factors = self.client().factors()
        self.assertIn("pin", [f["factor"] for f in factors])

    def test_bad_json_then_connection_still_usable(self):
        r = self.raw()
        r.send(b"this is {not json\n")
        frame = r.frame()
        self.assertIs(frame["ok"], False)
        self.assertIsNone(frame["id"])
        self.assertIn("id", frame)
        self.assertEqual(frame["error"]["code"], "bad_request")
        self.assertTrue(frame["error"]["message"])
        r.send(b"[1, 2]\n")
        frame = r.frame()
        self.assertEqual((frame["id"], frame["error"]["code"]), (None, "bad_request"))
        r.send(b'{"id": 5, "op": "status"}\n')
        frame = r.frame()
        self.assertEqual(frame["id"], 5)
        self.assertIs(frame["ok"], True)

    def test_missing_op_carries_id(self):
        r = self.raw()
        r.send(b'{"id": 42, "account": "x"}\n{"id": "abc"}\n')
        frames = {f["id"]: f for f in (r.frame(), r.frame())}
        self.assertEqual(set(frames), {42, "abc"})
        for f in frames.values():
            self.assertIs(f["ok"], False)
            self.assertEqual(f["error"]["code"], "bad_request")
            self.assertTrue(f["error"]["message"])

    def test_unknown_op(self):
        with self.assertRaises(VaultError) as cm:
            self.client().call("frobnicate")
        self.assertEqual(cm.exception.code, "bad_request")
        self.assertIn("frobnicate", cm.exception.message)

    def test_line_too_long_closes_connection(self):
        r = self.raw()
        head = b'{"id": 1, "op": "status", "pad": "'
        tail = b'"}\n'
        line = head + b"x" * (70_000 - len(head) - len(tail)) + tail
        self.assertEqual(len(line), 70_000)
        try:
            r.send(line)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server may close before reading it all; the answer is already queued
        frame = r.frame()
        self.assertIsNotNone(frame, "no answer before the connection closed")
        self.assertIsNone(frame["id"])
        self.assertIs(frame["ok"], False)
        self.assertEqual(frame["error"]["code"], "bad_request")
        self.assertIsNone(r.frame(), "the connection should be closed after the one error")
        # The library reports it the same way.
        c = self.vaultd.client()
        self.addCleanup(c.close)
        rid = c.send("status", pad="x" * 70_000)
        with self.assertRaises(VaultError) as cm:
            c.wait(None)
        self.assertEqual(cm.exception.code, "bad_request")
        with self.assertRaises(VaultConnectionError):
            c.wait(rid)
        # vaultd itself is fine.
        self.assertIn("locked", self.client().status())

    def test_pipelined_requests_raw(self):
        """20 requests in one write, some bad; every id answered exactly once."""
        requests = []
        expected = {}
        for i in range(20):
            rid = i if i % 2 == 0 else "req-%d" % i
            kind = i % 7
            if kind == 0:
                req, want = {"op": "status"}, None
            elif kind == 1:
                req, want = {"op": "no_such_op"}, "bad_request"
            elif kind == 2:
                req, want = {"op": "factors"}, None
            elif kind == 3:
                req, want = {"account": "nobody"}, "bad_request"  # no op
            elif kind == 4:
                req, want = {"op": "logout"}, "bad_request"  # no account, no all
            elif kind == 5:
                req, want = {"op": "unlock", "factor": "retina"}, "bad_request"
            else:
                req, want = {"op": "enroll"}, "bad_request"  # no factor
            req["id"] = rid
            requests.append(json.dumps(req).encode())
            expected[rid] = want
        requests.insert(5, b"{broken json")
        requests.insert(12, b'"just a string"')
        r = self.raw()
        r.send(b"\n".join(requests) + b"\n")
        answers = {}
        nulls = 0
        while len(answers) < len(expected) or nulls < 2:
            frame = r.frame()
            self.assertIsNotNone(frame, "connection closed early")
            self.assertNotIn("event", frame)
            rid = frame["id"]
            if rid is None:
                nulls += 1
                self.assertEqual(frame["error"]["code"], "bad_request")
                continue
            self.assertIn(rid, expected, "answer for an id never sent: %r" % rid)
            self.assertNotIn(rid, answers, "two answers for id %r" % rid)
            answers[rid] = frame
        with self.assertRaises(socket.timeout):
            extra = r.frame(timeout=0.5)
            self.fail("unexpected extra frame: %r" % extra)
        for rid, want in expected.items():
            frame = answers[rid]
            if want is None:
                self.assertIs(frame["ok"], True, frame)
                self.assertIn("result", frame)
            else:
                self.assertIs(frame["ok"], False, frame)
                self.assertEqual(frame["error"]["code"], want, frame)

    def test_pipelined_requests_library(self):
        c = self.client()
        ops = ["status", "factors", "nope", "status", "logout"] * 4
        ids = [c.send(op) for op in ops]
        self.assertEqual(len(set(ids)), 20)
        outcomes = {}
        for rid, op in reversed(list(zip(ids, ops))):  # wait in the opposite order
            try:
                outcomes[rid] = ("ok", c.wait(rid))
            except VaultError as e:
                outcomes[rid] = ("error", e.code)
        for rid, op in zip(ids, ops):
            kind, value = outcomes[rid]
            if op in ("status", "factors"):
                self.assertEqual(kind, "ok")
                self.assertIn("factors", value)
            else:
                self.assertEqual((kind, value), ("error", "bad_request"))
        self.assertEqual(c._responses, {})  # nothing left unclaimed

    def test_prompt_answered_at_once_is_never_lost(self):
        """A client may answer a prompt the moment it arrives; vaultd must accept it.

        (vaultd writes the prompt before it registers the question as open, so a
        fast answer can be refused with "There is no open question with that id"
        and the request then hangs until the prompt timeout.) Each round asks to
        enroll the PIN and cancels the first question at once; nothing is stored.
        """
        r = self.raw()
        r.send(b'{"id": "h", "op": "hello", "client": "pytest", "interactive": true}\n')
        self.assertIs(r.frame()["ok"], True)
        refused = []
        rounds = 200
        for i in range(rounds):
            rid, aid = 2 * i + 10, 2 * i + 11
            r.send(b'{"id": %d, "op": "enroll", "factor": "pin"}\n' % rid)
            prompt = r.frame()
            self.assertIsNotNone(prompt)
            self.assertEqual((prompt.get("event"), prompt["id"]), ("prompt", rid), prompt)
            self.assertEqual(prompt["prompt"]["kind"], "secret")
            answer = {"id": aid, "op": "answer", "pid": prompt["prompt"]["pid"], "cancel": True}
            r.send(json.dumps(answer).encode() + b"\n")
            replies = {}
            while len(replies) < 2:
                f = r.frame()
                self.assertIsNotNone(f)
                if f["id"] == aid and not f["ok"]:
                    refused.append((answer, f))
                    break  # the enroll request stays open on the server until the prompt timeout
                self.assertIn(f["id"], (rid, aid), f)
                replies[f["id"]] = f
            else:
                self.assertEqual(replies[aid]["result"], {})
                self.assertEqual(replies[rid]["error"]["code"], "cancelled")
        self.assertEqual(len(refused), 0, "%d of %d immediate answers were refused (vaultd prompt race); first: %s"
                         % (len(refused), rounds, refused[:1]))
        pin = [f for f in self.client().status()["factors"] if f["factor"] == "pin"][0]
        self.assertEqual(pin["state"], "not_enrolled")

    def test_norwegian_messages(self):
        en, nb = self.client(lang="en"), self.client(lang="nb")
        for op in ("frobnicate", "logout"):
            with self.assertRaises(VaultError) as e_en:
                en.call(op)
            with self.assertRaises(VaultError) as e_nb:
                nb.call(op)
            self.assertEqual(e_en.exception.code, e_nb.exception.code)
            self.assertTrue(e_nb.exception.message.strip())
            self.assertNotEqual(e_en.exception.message, e_nb.exception.message)
        label_en = {f["factor"]: f["label"] for f in en.factors()}["pin"]
        label_nb = {f["factor"]: f["label"] for f in nb.factors()}["pin"]
        self.assertTrue(label_nb)
        self.assertNotEqual(label_en, label_nb)
        # Framing errors follow the language too once hello has been said.
        nb.send_line("{oops")
        with self.assertRaises(VaultError) as cm:
            nb.wait(None)
        self.assertEqual(cm.exception.code, "bad_request")
        self.assertIn("JSON", cm.exception.message)
        self.assertNotIn("The request", cm.exception.message)


class TestSessions(VaultdTestCase):
    """Import, release and logout of sessions (no factor enrolled)."""

    def test_import_then_session_never_has_refresh_token(self):
        c = self.client()
        imported = self.import_session(c, "alice", name="Alice Example",
                                       access_token="AT-alice-123", refresh_token="RT-alice-very-secret")
        self.assertEqual(imported["account"], "alice")
        rid = c.send("session", account="alice")
        raw = c.response(rid)
        self.assertIs(raw["ok"], True)
        text = json.dumps(raw)
        self.assertNotIn("refresh_token", text)
        self.assertNotIn("RT-alice-very-secret", text)
        s = raw["result"]
        self.assertEqual(s["access_token"], "AT-alice-123")
        self.assertEqual(s["token_type"], "Bearer")
        self.assertEqual(s["expires_at"], FAR_FUTURE)
        self.assertEqual(s["account"], "alice")
        self.assertIsInstance(s["provider"], str)
        self.assertIsInstance(s["claims"], dict)
        self.assertEqual(s["claims"]["name"], "Alice Example")
        self.assertNotIn("refresh_token", s["claims"])
        # The convenience method gives the same, and the listing shows no secrets either.
        self.assertEqual(c.session("alice")["access_token"], "AT-alice-123")
        listing = json.dumps(c.call("sessions"))
        self.assertNotIn("RT-alice-very-secret", listing)
        self.assertNotIn("AT-alice-123", listing)
        self.assertIn("alice", [a["account"] for a in c.status()["accounts"]])

    def test_import_default_account_is_issuer_host(self):
        c = self.client()
        result = c.call("import", issuer=ISSUER, client_id="pytest-client", refresh_token="RT-host",
                        access_token="AT-host", expires_at=FAR_FUTURE)
        self.assertEqual(result["account"], "login.example.org")
        self.assertEqual(c.session("login.example.org")["access_token"], "AT-host")

    def test_example_app_greets(self):
        c = self.client()
        self.import_session(c, "carol", name="Carol Example")
        r = self.run_example_app("--account", "carol")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertTrue(r.stdout.startswith("Hello, Carol Example"), r.stdout)

    def test_vaultctl_sees_import(self):
        if not os.access(VAULTCTL, os.X_OK):
            raise cannot_run_here("vaultctl not found at %s (set VAULTCTL)" % VAULTCTL)
        c = self.client()
        self.import_session(c, "erin")
        r = subprocess.run([VAULTCTL, "sessions", "--socket", self.vaultd.socket, "--json", "--non-interactive"],
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("erin", r.stdout)
        self.assertNotIn("RT-erin-secret", r.stdout)

    def test_logout_all(self):
        c = self.client()
        self.import_session(c, "bob")
        before = len(c.call("sessions")["sessions"])
        self.assertGreaterEqual(before, 1)
        result = c.logout(all=True)
        self.assertEqual(result["revoked"], before)
        with self.assertRaises(VaultError) as cm:
            c.session()
        self.assertEqual(cm.exception.code, "no_session")
        self.assertTrue(cm.exception.message)
        self.assertEqual(c.status()["accounts"], [])
        self.assertEqual(c.logout(all=True)["revoked"], 0)
        r = self.run_example_app()
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stdout.strip(), cm.exception.message)


FAKE_PINENTRY = os.path.join(ROOT, "Tests", "pinentry", "fake-pinentry")


class TestSwiftExampleApp(VaultdTestCase):
    """The Swift example app reads what this test (Python) imported: two
    programs, one session. With per-app grants on, the Swift app would be
    asked about (test_app_grants.py tests that); here the grants are off on
    purpose, as `per_app = false` allows for a single-app setup."""

    CONFIG = "per_app = false\n"

    def test_swift_example_app_greets_and_says_what_is_wrong(self):
        c = self.client()
        self.import_session(c, "dave", name="Dave Example", access_token="AT-dave-swift")
        r = self.run_example_app("--account", "dave", swift=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(r.stdout.strip(), "Hello, Dave Example")
        self.assertNotIn("AT-dave-swift", r.stdout + r.stderr)
        # An account the vault does not hold: the vault's own sentence, in the person's language.
        for lang, env_lang in (("en", "C.UTF-8"), ("nb", "nb_NO.UTF-8")):
            nb = self.client(lang=lang)
            with self.assertRaises(VaultError) as cm:
                nb.session("nobody-here")
            r = self.run_example_app("--account", "nobody-here", swift=True, env_extra={"LANG": env_lang})
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertEqual(r.stdout.strip(), cm.exception.message)


class FakePinentryTestCase(VaultdTestCase):
    """A class's vaultd whose dialogs go to the scripted pinentry
    (Tests/pinentry/fake-pinentry): ``fake_log`` records what it was told,
    ``script`` sets its answers."""

    PINENTRY_CONFIG = FAST_PIN_CONFIG

    @classmethod
    def setUpClass(cls):
        cls.fake_dir = tempfile.mkdtemp(prefix="sv-pytest-pinentry-")
        cls.addClassCleanup(shutil.rmtree, cls.fake_dir, ignore_errors=True)
        cls.fake_log = os.path.join(cls.fake_dir, "log")
        cls.fake_script = os.path.join(cls.fake_dir, "script")
        cls.CONFIG = 'pinentry = "%s"\n%s' % (FAKE_PINENTRY, cls.PINENTRY_CONFIG)
        os.environ["FAKE_PINENTRY_LOG"] = cls.fake_log
        os.environ["FAKE_PINENTRY_SCRIPT"] = cls.fake_script
        try:
            super().setUpClass()
        finally:
            del os.environ["FAKE_PINENTRY_LOG"]
            del os.environ["FAKE_PINENTRY_SCRIPT"]

    def script(self, *actions):
        with open(self.fake_script, "w") as f:
            f.write("".join(a + "\n" for a in actions))


class TestVaultPrompter(FakePinentryTestCase):
    """``prompter="vault"``: vaultd asks through its own (scripted) pinentry; the app only waits."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        with cls.vaultd.client(on_prompt=Prompter(PIN, PIN)) as c:
            c.hello("pytest-setup", interactive=True)
            c.call("enroll", factor="pin")
            c.call("import", issuer=ISSUER, client_id="pytest-client", account="kari", name="Kari Nordmann",
                   refresh_token="RT-kari-secret", access_token="AT-kari", expires_at=FAR_FUTURE)

    def test_locked_vault_asks_in_its_own_dialog(self):
        self.client().lock()
        self.script("pin " + PIN)
        seen = []
        c = self.vaultd.client(on_prompt=seen.append)
        self.addCleanup(c.close)
        hello = c.hello("aktivitetslogg", lang="nb", prompter="vault")
        self.assertEqual(hello.get("prompter"), "vault")
        s = c.session("kari")
        self.assertEqual(s["access_token"], "AT-kari")
        self.assertEqual(seen, [], "a prompter-vault client never gets a prompt event")
        with open(self.fake_log) as f:
            log = f.read()
        self.assertIn("GETPIN", log)
        self.assertIn("vil bruke innloggingen din.", log)

    def test_cancel_in_the_dialog(self):
        self.client().lock()
        self.script("cancel")
        c = self.vaultd.client()
        self.addCleanup(c.close)
        c.hello("aktivitetslogg", prompter="vault")
        with self.assertRaises(VaultError) as e:
            c.session("kari")
        self.assertEqual(e.exception.code, "cancelled")


class TestPinFlow(VaultdTestCase):
    """PIN enrollment, lock, and unlock through prompts."""

    CONFIG = FAST_PIN_CONFIG

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        with cls.vaultd.client() as c:
            c.hello("pytest-setup")
            c.call("import", issuer=ISSUER, client_id="pytest-client", account="dave", name="Dave Example",
                   refresh_token="RT-dave-secret", access_token="AT-dave", expires_at=FAR_FUTURE)
        # A weak PIN first: refused with a message, then asked again.
        cls.enroll_prompter = Prompter("123456", PIN, PIN)
        with cls.vaultd.client(on_prompt=cls.enroll_prompter) as c:
            c.hello("pytest-setup", interactive=True)
            cls.enroll_result = c.call("enroll", factor="pin")

    def setUp(self):
        super().setUp()
        self.client().lock()

    def unlock_with_pin(self):
        c = self.client(interactive=True, on_prompt=Prompter(PIN))
        self.assertEqual(c.unlock("pin"), {"locked": False})

    def test_enrollment_through_prompts(self):
        self.assertEqual(self.enroll_result["factor"], "pin")
        self.assertEqual(self.enroll_result["state"], "enabled")
        self.assertEqual(self.enroll_prompter.kinds, ["secret", "message", "secret", "secret", "message"])
        for p in self.enroll_prompter.seen:
            self.assertTrue(p["pid"])
            self.assertTrue(p["text"])
            self.assertNotIn(PIN, p["text"])
        states = {f["factor"]: f["state"] for f in self.client().factors()}
        self.assertEqual(states["pin"], "enabled")

    def test_locked_session_non_interactive(self):
        c = self.client()
        self.assertIs(c.status()["locked"], True)
        with self.vaultd.client() as other:
            self.assertIs(other.hello("pytest")["locked"], True)
        with self.assertRaises(VaultError) as cm:
            c.session()
        self.assertEqual(cm.exception.code, "locked")
        self.assertEqual(cm.exception.extra.get("factors"), ["pin"])
        self.assertTrue(cm.exception.message)
        # An app without a terminal gets the vault's message and exit code 1.
        r = self.run_example_app()
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stdout.strip(), cm.exception.message)

    def test_interactive_unlock_with_pin(self):
        prompter = Prompter(PIN)
        c = self.client(interactive=True, on_prompt=prompter)
        self.assertEqual(c.unlock(), {"locked": False})
        self.assertEqual(prompter.kinds, ["secret"])
        self.assertIs(c.status()["locked"], False)
        self.assertEqual(self.client().session()["access_token"], "AT-dave")

    def test_interactive_session_asks_for_pin(self):
        prompter = Prompter(PIN)
        c = self.client(interactive=True, on_prompt=prompter)
        self.assertEqual(c.session("dave")["access_token"], "AT-dave")
        self.assertEqual(prompter.kinds, ["secret"])

    def test_wrong_pin_message_then_ask_again_then_cancel(self):
        prompter = Prompter("975310", None)  # wrong, then cancel
        c = self.client(interactive=True, on_prompt=prompter)
        with self.assertRaises(VaultError) as cm:
            c.unlock("pin")
        self.assertEqual(cm.exception.code, "cancelled", cm.exception.message)
        self.assertTrue(cm.exception.message)
        self.assertEqual(prompter.kinds, ["secret", "message", "secret"])
        failure = prompter.seen[1]["text"]
        self.assertTrue(failure)
        self.assertNotIn("975310", failure)
        self.assertIs(c.status()["locked"], True)
        self.unlock_with_pin()  # resets the failure counter for the other tests

    def test_no_prompt_handler_cancels(self):
        c = self.client(interactive=True, on_prompt=None)
        with self.assertRaises(VaultError) as cm:
            c.unlock()
        self.assertEqual(cm.exception.code, "cancelled")
        self.assertIs(c.status()["locked"], True)

    def test_norwegian_locked_message(self):
        with self.assertRaises(VaultError) as e_en:
            self.client(lang="en").session()
        with self.assertRaises(VaultError) as e_nb:
            self.client(lang="nb").session()
        self.assertEqual(e_nb.exception.code, "locked")
        self.assertTrue(e_nb.exception.message.strip())
        self.assertNotEqual(e_en.exception.message, e_nb.exception.message)
        r = self.run_example_app(env_extra={"LANG": "nb_NO.UTF-8"})
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stdout.strip(), e_nb.exception.message)

    def test_log_has_no_secrets(self):
        self.unlock_with_pin()
        log = self.vaultd.read_log()
        self.assertIn("ready", log)
        for secret in (PIN, "RT-dave-secret", "AT-dave"):
            self.assertNotIn(secret, log)


if __name__ == "__main__":
    unittest.main()


class TestWatch(VaultdTestCase):
    """``watch()`` and ``events()``: vault events as an iterator."""

    def test_events_arrive_in_order_and_answers_still_reach_their_requests(self):
        watcher = self.client("pywatcher")
        self.assertEqual(watcher.watch(), {"watching": True, "locked": False})
        other = self.client("pyother")
        self.import_session(other, "py-watch")
        other.logout(account="py-watch")
        other.lock()
        # A request sent while events wait: its answer is kept for it, the events for events().
        self.assertIn("locked", watcher.status())
        events = list(watcher.events(timeout=0.5))
        self.assertEqual([e["kind"] for e in events], ["logged_out", "locked"], events)
        self.assertEqual(events[0]["account"], "py-watch")
        self.assertEqual(events[1]["reason"], "request")
        self.assertIsNone(watcher.next_event(timeout=0.2))
        # A connection that did not watch hears nothing.
        self.assertIsNone(other.next_event(timeout=0.2))
