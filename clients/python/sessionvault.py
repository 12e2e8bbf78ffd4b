"""SessionVault client: talk to the per-user ``vaultd`` over its Unix socket.

Standard library only. One JSON object per line (protocol version 1, see
PROTOCOL.md). Several requests may be in flight on one connection; answers are
matched by ``id``. A ``VaultClient`` is not thread-safe: use one per thread.

Usage (an app asking for its session)::

    from sessionvault import VaultClient, VaultError

    try:
        with VaultClient() as vault:
            vault.hello("my-app", lang="en")
            s = vault.session()
        print("Hello,", s["claims"]["name"])   # s["access_token"] for your API
    except VaultError as e:
        print(e.message)   # e.g. locked: "The vault is locked. ..."
        # e.code == "locked"; e.extra["factors"] lists what unlocks it
"""

import collections
import itertools
import json
import os
import socket
import struct
import time

__all__ = ["VaultClient", "VaultError", "VaultConnectionError", "default_socket_path", "display_fields", "PROTOCOL_VERSION"]

PROTOCOL_VERSION = 1


class VaultError(Exception):
    """A failure reported by vaultd: switch on ``code``, show ``message``."""

    def __init__(self, code, message, extra=None, id=None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.extra = dict(extra or {})
        self.id = id

    def __repr__(self):
        return "VaultError(%r, %r, %r)" % (self.code, self.message, self.extra)


class VaultConnectionError(VaultError):
    """vaultd could not be reached, or the connection broke (code ``unavailable``),
    or what answers at the socket is not vaultd: it runs as another user, or
    inside a sandbox (code ``foreign_server``)."""

    def __init__(self, message, code="unavailable"):
        super().__init__(code, message)


def display_fields():
    """Where this process is shown, for vaultd's own dialogs."""
    out = {}
    for key, env in (("display", "DISPLAY"), ("wayland_display", "WAYLAND_DISPLAY")):
        if os.environ.get(env):
            out[key] = os.environ[env]
    try:
        if os.isatty(0):
            out["tty"] = os.ttyname(0)
            if os.environ.get("TERM"):
                out["term"] = os.environ["TERM"]
    except OSError:
        pass
    return out


def default_socket_path():
    """$SESSIONVAULT_SOCKET, else $XDG_RUNTIME_DIR/sessionvault/vault.sock, else /tmp/sessionvault-UID/vault.sock."""
    path = os.environ.get("SESSIONVAULT_SOCKET")
    if path:
        return path
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return os.path.join(runtime, "sessionvault", "vault.sock")
    return "/tmp/sessionvault-%d/vault.sock" % os.getuid()


def _runs_under_another_root(pid):
    """True only when process ``pid`` demonstrably runs in a sandbox: its root
    directory (``/proc/PID/root/``) is not ours.

    Everything that cannot tell is False: pid 0 (the server is outside our pid
    namespace, as vaultd is for a client inside a Flatpak sandbox); a client
    that is itself in a Flatpak sandbox (``/.flatpak-info``: its root is the
    sandbox's, so vaultd's differs by design); or an unreadable
    ``/proc/PID/root`` (the real vaultd is not dumpable). The same rule as the
    Swift client's ``runsUnderAnotherRoot``.
    """
    if pid <= 0 or os.path.lexists("/.flatpak-info"):
        return False
    # An impostor can make its root unreadable (not dumpable); its pid
    # namespaces it cannot hide: more than one pid in NSpid means a pid
    # namespace below ours, as every Flatpak app has and vaultd never does.
    if _pid_namespace_depth(pid) > 1:
        return True
    theirs, ours = _directory_identity("/proc/%d/root/" % pid), _directory_identity("/")
    return theirs is not None and ours is not None and theirs != ours


def _pid_namespace_depth(pid):
    """How many pid namespaces, from ours down, process ``pid`` has a pid in (0: unreadable)."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("NSpid:"):
                    return len(line.split()) - 1
    except OSError:
        pass
    return 0


def _directory_identity(path):
    """(st_dev, st_ino) of the directory at ``path`` (followed), or None when unreadable."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


class VaultClient:
    """One connection to vaultd.

    ``on_prompt(prompt)`` is called for prompt events (after ``hello`` with
    ``interactive=True``). ``prompt`` is the dict with ``pid``, ``kind``
    (secret, confirm, message, open_url, choice), ``text``, and any extras.
    Return the answer, or None to cancel. ``message`` prompts need no answer
    (the return value is ignored). Without ``on_prompt`` every question is cancelled.

    ``timeout`` bounds each wait for data from vaultd (seconds, None = forever).
    """

    def __init__(self, socket_path=None, on_prompt=None, timeout=150.0, connect=True):
        self.socket_path = socket_path or default_socket_path()
        self.on_prompt = on_prompt
        self.timeout = timeout
        self.server = None
        self._sock = None
        self._buffer = bytearray()
        self._ids = itertools.count(1)
        self._responses = {}  # id -> [response, ...] not yet collected
        self._answer_ids = set()  # ids of our own `answer` requests (their ok replies are dropped)
        self._events = collections.deque()  # vault events (after `watch`) read while waiting for an answer
        self._closed = False
        self._greeting = None  # (id, line) of a `greet` not sent yet
        self._greeted = None  # its id, sent, answer not read yet
        if connect:
            self.connect()

    # -- connection -------------------------------------------------------

    def connect(self):
        """Open the socket (done by the constructor unless ``connect=False``)."""
        if self._sock is not None:
            return
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.socket_path)
        except OSError as e:
            sock.close()
            raise VaultConnectionError(
                "Could not reach SessionVault at %s (%s). Is vaultd running?" % (self.socket_path, e.strerror or e)
            ) from None
        # Anyone who can create the socket path first (another user, when it is
        # /tmp/sessionvault-UID) could pose as vaultd and collect PINs and
        # tokens: speak only to a server that runs as us (SO_PEERCRED).
        try:
            pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
        except OSError:
            pid, uid = 0, None
        if uid is None or uid & 0xFFFFFFFF != os.getuid():
            sock.close()
            raise VaultConnectionError(
                "The program at %s is not your vaultd (it runs as another user), so nothing was sent to it. "
                "Remove that socket (ask an administrator if it is not yours) and start vaultd again." % self.socket_path,
                code="foreign_server",
            )
        # Our own uid is not enough: an app in a sandbox runs as us, and one
        # allowed to write the socket's directory can put its own socket at the
        # path and relay to vaultd. vaultd never runs in a sandbox, so a server
        # whose root directory is not ours is refused.
        if _runs_under_another_root(pid):
            sock.close()
            raise VaultConnectionError(
                "The program at %s is not your vaultd (it runs inside an app's sandbox), so nothing was sent to it. "
                "An app may have put its own socket there: try again in a few seconds, and if this message comes back, "
                "close your sandboxed (Flatpak) apps, or log out and in again."
                % self.socket_path,
                code="foreign_server",
            )
        self._sock = sock
        self._closed = False

    def close(self):
        """Close the connection. Open questions on the server count as cancelled."""
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def fileno(self):
        return self._sock.fileno() if self._sock else -1

    # -- requests ---------------------------------------------------------

    def hello(self, client, lang="en", interactive=False, prompter=None):
        """Introduce the client; settles language and interactivity for this connection.

        ``prompter="vault"``: vaultd asks the person itself, in its own dialog
        (pinentry) on this process's display, and this client never receives a
        prompt event or sees a PIN; it just waits for the answer. The result then
        has ``"prompter": "vault"`` (an older vaultd leaves it out).
        """
        result = self.call("hello", **self._hello_fields(client, lang, interactive, prompter))
        self.server = result
        return result

    def greet(self, client, lang="en", interactive=False, prompter=None):
        """``hello``, sent with the next request instead of before it: both lines
        go out in one write and both answers come back together, so an app that
        connects for one request waits one round trip, not two. vaultd takes a
        connection's lines in order, so the request is served in this hello's
        language and mode. ``self.server`` is set when the answers arrive; a
        refused hello is raised by that request's ``call``.
        """
        fields = self._hello_fields(client, lang, interactive, prompter)
        request_id = next(self._ids)
        message = {"id": request_id, "op": "hello"}
        message.update(fields)
        self._greeting = (request_id, json.dumps(message, separators=(",", ":"), ensure_ascii=False))

    @staticmethod
    def _hello_fields(client, lang, interactive, prompter):
        fields = dict(version=PROTOCOL_VERSION, client=client, lang=lang, interactive=bool(interactive))
        if prompter is not None:
            fields["prompter"] = prompter
            if prompter == "vault":
                fields.update(display_fields())
        return fields

    def call(self, op, **fields):
        """Send one request and wait for its answer: the ``result`` dict, or raises VaultError."""
        return self.wait(self.send(op, **fields))

    def send(self, op, **fields):
        """Send a request without waiting; returns its id (for ``wait``)."""
        if "id" in fields:
            raise ValueError("the id is chosen by the client library")
        request_id = next(self._ids)
        message = {"id": request_id, "op": op}
        message.update(fields)
        line = json.dumps(message, separators=(",", ":"), ensure_ascii=False)
        if self._greeting is not None:
            self._greeted, greeting = self._greeting
            self._greeting = None
            line = greeting + "\n" + line
        self.send_line(line)
        return request_id

    def wait(self, request_id):
        """Wait for the answer to ``request_id``; returns its result or raises VaultError."""
        if self._greeted is not None:
            # A `greet`'s hello went with the first request: its answer comes first.
            greeted, self._greeted = self._greeted, None
            self.server = self._unwrap(self._next_for(greeted))
        response = self._next_for(request_id)
        return self._unwrap(response)

    def response(self, request_id):
        """Wait for the raw response dict for ``request_id`` (``ok``, ``result`` or ``error``)."""
        return self._next_for(request_id)

    # -- convenience ------------------------------------------------------

    def status(self):
        """Lock state, accounts and unlock methods."""
        return self.call("status")

    def session(self, account=None):
        """The session for an app: access token, expiry, claims (never a refresh token)."""
        return self.call("session", **({"account": account} if account is not None else {}))

    def lock(self):
        """Lock the vault now. A sandboxed app locks an open vault once in ten
        minutes; another lock within them raises VaultError with code
        "rate_limited" (extra["retry_after"]: the seconds to wait), and the vault
        stays open."""
        return self.call("lock")

    def unlock(self, factor=None):
        """Unlock with ``factor`` (e.g. "pin"), or the next method in policy order."""
        return self.call("unlock", **({"factor": factor} if factor is not None else {}))

    def factors(self):
        """List of unlock methods with ``factor``, ``state`` and ``label``."""
        return self.call("factors")["factors"]

    def logout(self, account=None, all=False):
        """Log one account out, or every account with ``all=True``; returns the result with ``revoked``."""
        fields = {}
        if account is not None:
            fields["account"] = account
        if all:
            fields["all"] = True
        return self.call("logout", **fields)

    # -- events -------------------------------------------------------------

    def watch(self):
        """Ask for vault events on this connection; returns ``{"watching": True, "locked": ...}``.

        From then on ``events()`` yields each event as a dict: ``kind`` is
        ``locked`` (with ``reason``), ``unlocked``, ``session_expired``,
        ``logged_out`` or ``grant_revoked`` (with ``account``), or ``resync``
        (events were missed: call ``status()``). See docs/protocol.md, "Events".
        """
        return self.call("watch")

    def events(self, timeout=None):
        """Yield vault events as they come (after ``watch``), blocking between them.

        ``timeout``: stop (return) after that many seconds without an event;
        None waits forever. Answers to requests sent meanwhile are kept for ``wait``.
        """
        while True:
            event = self.next_event(timeout)
            if event is None:
                return
            yield event

    def next_event(self, timeout=None):
        """The next vault event, or None after ``timeout`` seconds without one."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._events:
            if self._sock is None:
                raise VaultConnectionError("Not connected to SessionVault.")
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if left == 0.0 and self._buffer.find(b"\n") < 0:
                return None
            self._sock.settimeout(left)
            try:
                frame = self.receive()
            except VaultConnectionError:
                if deadline is not None and time.monotonic() >= deadline and not self._closed:
                    return None
                raise
            finally:
                if self._sock is not None:
                    self._sock.settimeout(self.timeout)
            self._route(frame)
        return self._events.popleft()

    # -- low level ----------------------------------------------------------

    def send_line(self, line):
        """Write one raw line (str or bytes; the newline is added)."""
        if self._sock is None:
            raise VaultConnectionError("Not connected to SessionVault.")
        data = line.encode("utf-8") if isinstance(line, str) else bytes(line)
        try:
            self._sock.sendall(data + b"\n")
        except OSError as e:
            raise VaultConnectionError("The connection to SessionVault broke (%s)." % (e.strerror or e)) from None

    def receive(self):
        """Read the next frame from vaultd (a dict), without any matching or prompt handling."""
        while True:
            newline = self._buffer.find(b"\n")
            if newline >= 0:
                line = bytes(self._buffer[:newline])
                del self._buffer[: newline + 1]
                if not line.strip():
                    continue
                try:
                    return json.loads(line.decode("utf-8"))
                except ValueError:
                    raise VaultConnectionError("SessionVault sent something that is not JSON.") from None
            if self._closed or self._sock is None:
                raise VaultConnectionError("The connection to SessionVault was closed.")
            try:
                chunk = self._sock.recv(65_536)
            except socket.timeout:
                raise VaultConnectionError("SessionVault did not answer in time.") from None
            except OSError as e:
                self._closed = True
                raise VaultConnectionError("The connection to SessionVault broke (%s)." % (e.strerror or e)) from None
            if not chunk:
                self._closed = True
                raise VaultConnectionError("The connection to SessionVault was closed.")
            self._buffer.extend(chunk)

    def _next_for(self, request_id):
        while True:
            queued = self._responses.get(request_id)
            if queued:
                response = queued.pop(0)
                if not queued:
                    del self._responses[request_id]
                return response
            self._route(self.receive())

    def _route(self, frame):
        """Files one frame: a prompt is answered, an event queued, an answer kept for its request."""
        if not isinstance(frame, dict):
            return
        if frame.get("event") == "prompt":
            self._handle_prompt(frame.get("prompt") or {})
            return
        if frame.get("event") == "vault":
            self._events.append(frame)
            return
        frame_id = frame.get("id")
        if frame_id is not None and frame_id in self._answer_ids:
            self._answer_ids.discard(frame_id)
            if frame.get("ok") is not True:
                # vaultd refused our answer (e.g. the question timed out): say so
                # now instead of waiting for a request that cannot finish.
                self._unwrap(frame)
            return
        # JSON ids are integers or strings; kept as such (1 and "1" differ).
        self._responses.setdefault(frame_id, []).append(frame)

    def _handle_prompt(self, prompt):
        kind = prompt.get("kind")
        value = self.on_prompt(prompt) if self.on_prompt else None
        if kind == "message":
            return
        pid = prompt.get("pid")
        answer_id = next(self._ids)
        self._answer_ids.add(answer_id)
        message = {"id": answer_id, "op": "answer", "pid": pid}
        if value is None:
            message["cancel"] = True
        else:
            message["value"] = value
        self.send_line(json.dumps(message, separators=(",", ":"), ensure_ascii=False))

    @staticmethod
    def _unwrap(response):
        if response.get("ok") is True:
            return response.get("result") or {}
        error = dict(response.get("error") or {})
        code = error.pop("code", "internal")
        message = error.pop("message", "")
        raise VaultError(code, message, error, id=response.get("id"))
