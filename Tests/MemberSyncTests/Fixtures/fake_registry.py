#!/usr/bin/env python3
"""A fake member registry for MemberSyncTests (standard library only).

Speaks the API in docs/member-sync.md on 127.0.0.1:

  POST /v1/members/lookup        {"provider","subject"}
  POST /v1/members/national-id   {"provider","subject","national_id","source"} + Idempotency-Key

and honours idempotency keys: a repeated key gets the first answer and
writes nothing. Its state (members, idempotency keys, writes) lives in a JSON
file, so a restart on the same port ("the registry comes back") keeps it.

Test controls (no auth): POST /_control with any of
  {"seed": {member_id: {"logins": [[provider, subject]], "national_id": null,
                        "organizations": [...]}},
   "fail": {"count": N, "status": 503}        # next N API requests answer `status`
   "fail_after_write": N,                     # next N writes happen, then answer 500
   "hash_key": "hex" | null,                  # answer national_id_hash instead
   "delay": seconds}                          # answer API requests this late
and GET /_control/state.

Prints "PORT <n>" once listening. Logs nothing (bodies hold the number).
Stops on SIGTERM, when its parent goes away, or after --max-seconds.
"""
import argparse
import hashlib
import json
import os
import signal
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LABEL = b"sessionvault/national-id/v1"
LOCK = threading.Lock()
STATE = {}
ARGS = None


def load():
    global STATE
    try:
        with open(ARGS.state) as f:
            STATE = json.load(f)
    except (FileNotFoundError, json.JSONDecodeError):
        STATE = {}
    STATE.setdefault("members", {})
    STATE.setdefault("idempotency", {})
    STATE.setdefault("writes", [])
    STATE.setdefault("fail", {"count": 0, "status": 503})
    STATE.setdefault("fail_after_write", 0)
    STATE.setdefault("hash_key", None)
    STATE.setdefault("requests", 0)
    STATE.setdefault("delay", 0)


def save():
    tmp = ARGS.state + ".tmp"
    with open(tmp, "w") as f:
        json.dump(STATE, f)
    os.replace(tmp, ARGS.state)


def keyed_hash(key_hex, digits):
    data = struct.pack("<Q", len(LABEL)) + LABEL + struct.pack("<Q", len(digits)) + digits.encode()
    return hashlib.blake2b(data, digest_size=32, key=bytes.fromhex(key_hex)).hexdigest()


def find_member(provider, subject):
    for member_id, m in STATE["members"].items():
        if [provider, subject] in m.get("logins", []):
            return member_id, m
    return None, None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, status, obj):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def read_json(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        return json.loads(raw or b"{}")

    def do_GET(self):
        if self.path == "/_control/state":
            with LOCK:
                self.send(200, STATE)
            return
        self.send(404, {"error": "not_found"})

    def do_POST(self):
        try:
            body = self.read_json()
        except ValueError:
            self.send(400, {"error": "bad_json"})
            return
        if self.path != "/_control":
            with LOCK:
                delay = STATE["delay"]
            if delay:
                time.sleep(delay)
        with LOCK:
            if self.path == "/_control":
                self.control(body)
                return
            STATE["requests"] += 1
            if self.headers.get("Authorization") != "Bearer " + ARGS.token:
                save()
                self.send(401, {"error": "unauthorized"})
                return
            if STATE["fail"]["count"] > 0:
                STATE["fail"]["count"] -= 1
                save()
                self.send(STATE["fail"]["status"], {"error": "injected"})
                return
            if self.path == "/v1/members/lookup":
                self.lookup(body)
            elif self.path == "/v1/members/national-id":
                self.write(body)
            else:
                self.send(404, {"error": "not_found"})
            save()

    def control(self, body):
        if "seed" in body:
            STATE["members"].update(body["seed"])
        if "fail" in body:
            STATE["fail"] = body["fail"]
        if "fail_after_write" in body:
            STATE["fail_after_write"] = body["fail_after_write"]
        if "hash_key" in body:
            STATE["hash_key"] = body["hash_key"]
        if "delay" in body:
            STATE["delay"] = body["delay"]
        save()
        self.send(200, {"ok": True})

    def lookup(self, body):
        member_id, m = find_member(body.get("provider"), body.get("subject"))
        if m is None:
            self.send(404, {"error": "not_found"})
            return
        answer = {"member_id": member_id, "organizations": m.get("organizations", [])}
        number = m.get("national_id")
        if number and STATE["hash_key"]:
            answer["national_id_hash"] = keyed_hash(STATE["hash_key"], number)
        else:
            answer["national_id"] = number
        self.send(200, answer)

    def write(self, body):
        key = self.headers.get("Idempotency-Key")
        if not key:
            self.send(400, {"error": "idempotency_key_required"})
            return
        if key in STATE["idempotency"]:
            status, answer = STATE["idempotency"][key]
            self.send(status, answer)
            return
        member_id, m = find_member(body.get("provider"), body.get("subject"))
        number = body.get("national_id")
        if m is None:
            status, answer = 404, {"error": "not_found"}
        elif not m.get("national_id"):
            m["national_id"] = number
            m["national_id_source"] = body.get("source")
            m["national_id_updated_at"] = time.time()
            STATE["writes"].append({"member": member_id, "source": body.get("source"), "key": key})
            status, answer = 200, {"result": "written"}
        elif m["national_id"] == number:
            status, answer = 200, {"result": "unchanged"}
        else:
            status, answer = 409, {"error": "conflict"}
        STATE["idempotency"][key] = [status, answer]
        if STATE["fail_after_write"] > 0:
            # The write happened; the answer is "lost".
            STATE["fail_after_write"] -= 1
            self.send(500, {"error": "injected_after_write"})
            return
        self.send(status, answer)


def watchdog(parent, deadline):
    while True:
        time.sleep(0.5)
        if os.getppid() != parent or time.time() > deadline:
            os._exit(0)


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--state", required=True)
    parser.add_argument("--token", default="test-token")
    parser.add_argument("--max-seconds", type=float, default=300)
    ARGS = parser.parse_args()
    # Started from a thread that blocks signals (a test's async context), we
    # inherit that mask: unblock SIGTERM so the test can stop us.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM, signal.SIGINT])
    load()
    save()
    server = ThreadingHTTPServer(("127.0.0.1", ARGS.port), Handler)
    server.daemon_threads = True
    threading.Thread(target=watchdog, args=(os.getppid(), time.time() + ARGS.max_seconds), daemon=True).start()
    print("PORT %d" % server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
