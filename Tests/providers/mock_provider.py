#!/usr/bin/env python3
"""Runs oidc-provider-mock (PyPI, Flask + Authlib under uvicorn) on loopback for tests.

    .venv/bin/python Tests/providers/mock_provider.py [--port 0] [--idle-exit 600] [-- MOCK ARGS]

Starts ``python -m oidc_provider_mock -H 127.0.0.1 -p PORT MOCK ARGS`` from the same venv,
waits until its discovery document answers, prints exactly one line
``READY http://127.0.0.1:PORT`` on stdout, and stops the mock when this process's parent
dies, when this process gets SIGTERM/SIGINT, or after --idle-exit seconds without requests
(seen in the mock's access log). If this wrapper is SIGKILLed, the mock still dies
(PR_SET_PDEATHSIG). With --port 0 (default) uvicorn binds an ephemeral port itself and
the wrapper reads the real port from its startup line, so there is no find-then-bind race.

MOCK ARGS are passed through, e.g. ``-- --user-claims '{"sub":"kari","name":"Kari"}'
--no-refresh-token true -e 60``. Facts about the mock (version 0.3.4), checked here:
  * issuer = scheme://Host-header, so always talk to it as http://127.0.0.1:PORT;
  * endpoints /oauth2/authorize, /oauth2/token, /userinfo, /jwks (no revocation);
  * login: POST the authorization URL (query string intact) with form field sub=<user>
    -> 302 to redirect_uri with code and state (no iss); action=deny -> access_denied;
  * PUT /users/<sub> with a JSON object *replaces* that user's claims;
  * any client_id/secret is accepted, but a secret is required: the code grant accepts
    client_secret_basic and client_secret_post, the refresh grant only client_secret_basic;
    a public client (no secret) gets invalid_client;
  * PKCE is ignored, refresh tokens are not rotated (the refresh response has no
    refresh_token and no id_token) and expire with the access token (-e, default 3600 s);
  * ID tokens: RS256 with no `kid` in the header (JWKS has one key with a kid), aud is a
    list, no azp; standard claims are filtered by scope (profile/email/phone/address),
    custom claims (e.g. nin) are always included, in the ID token and in userinfo;
  * unknown scopes are silently dropped at login; on refresh they give invalid_scope
    (so oidc-agent's offline_access fails).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request

RUNNING = re.compile(r"Uvicorn running on http://127\.0\.0\.1:(\d+)")


def set_pdeathsig():
    """In the child: get SIGKILL when the wrapper dies, even if it is SIGKILLed."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def main() -> int:
    argv = sys.argv[1:]
    extra: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0, help="0 = ephemeral (default)")
    ap.add_argument("--idle-exit", type=float, default=600, help="seconds without requests; 0 = never")
    ap.add_argument("--startup-timeout", type=float, default=30)
    ap.add_argument("--verbose", action="store_true", help="forward the mock's log to stderr")
    args = ap.parse_args(argv)

    env = dict(os.environ, PYTHONWARNINGS="ignore", NO_COLOR="1", PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "oidc_provider_mock", "-H", "127.0.0.1", "-p", str(args.port), *extra]
    child = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, env=env, preexec_fn=set_pdeathsig)

    def stop(code: int = 0):
        if child.poll() is None:
            child.terminate()
            try:
                child.wait(3)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait(3)
        os._exit(code)

    signal.signal(signal.SIGTERM, lambda *_: stop(0))
    signal.signal(signal.SIGINT, lambda *_: stop(0))

    port_found = threading.Event()
    state = {"port": args.port or None, "last": time.monotonic(), "log": []}

    def pump():
        # Read the mock's stderr: the startup line gives the port, access lines show activity.
        for raw in child.stderr:
            line = raw.decode("utf-8", "replace")
            state["last"] = time.monotonic()
            if len(state["log"]) < 200:
                state["log"].append(line)
            if args.verbose:
                sys.stderr.write("oidc-provider-mock: " + line)
            m = RUNNING.search(line)
            if m and not port_found.is_set():
                state["port"] = int(m.group(1))
                port_found.set()

    threading.Thread(target=pump, daemon=True).start()

    deadline = time.monotonic() + args.startup_timeout
    if not port_found.wait(args.startup_timeout) or not state["port"]:
        sys.stderr.write("mock_provider: oidc-provider-mock did not start:\n" + "".join(state["log"]))
        stop(1)
    base = f"http://127.0.0.1:{state['port']}"
    while True:
        try:
            with urllib.request.urlopen(base + "/.well-known/openid-configuration", timeout=2) as r:
                issuer = json.load(r)["issuer"]
            if issuer != base:
                sys.stderr.write(f"mock_provider: unexpected issuer {issuer!r}\n")
                stop(1)
            break
        except OSError:
            if child.poll() is not None or time.monotonic() > deadline:
                sys.stderr.write("mock_provider: no discovery answer:\n" + "".join(state["log"]))
                stop(1)
            time.sleep(0.05)

    print(f"READY {base}", flush=True)

    ppid = os.getppid()
    while True:
        time.sleep(0.2)
        if child.poll() is not None:
            sys.stderr.write(f"mock_provider: oidc-provider-mock exited ({child.returncode})\n")
            os._exit(1)
        if os.getppid() != ppid:
            stop(0)
        if args.idle_exit > 0 and time.monotonic() - state["last"] > args.idle_exit:
            stop(0)


if __name__ == "__main__":
    sys.exit(main())
