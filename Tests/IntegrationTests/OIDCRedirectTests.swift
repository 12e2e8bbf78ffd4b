import Foundation
import VaultProtocol
import VaultTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Login errors beyond the provider's own: forged and missing redirects, the
/// loopback listener's cleanup, more ID token defects, the minimum age, and
/// refreshes that cannot happen — through a real vaultd and vaultctl.
final class OIDCRedirectTests: OIDCTestCase {

    /// A "browser" that does what a hostile page or a person who walks away would
    /// do (env FORGE_MODE). It is started, as any browser, at vaultd's one-time
    /// launch page, which it follows to the provider's address first (but in the
    /// two modes that let something else read it first): `stall` opens the login page and stops there;
    /// `forged_state` sends a redirect with someone else's state; `dup_state`
    /// repeats the right state; `stray_then_real` sends the forged one, writes
    /// its HTTP status to FORGE_OUT.stray, then logs in as scripts/demo-browser
    /// (FORGE_REAL) does; `held_then_real` first has another user (nobody, when
    /// run as root) open 96 connections to the redirect port that send nothing or
    /// half a request and keep them open, waits until the listener closed all of
    /// them (another user's) or 64 (its own), writes how many it closed (and that
    /// user's uid) to FORGE_OUT.held, then logs in the same way while the rest
    /// are still held; `other_user_logs_in` first has another user read the
    /// login's address from this browser's command line (as `ps` shows it to
    /// anyone) and log in with it as Ola, following the provider's redirect to
    /// the port as their own browser would, writes that user's uid, whether the
    /// address was found and the answer it got to FORGE_OUT.other, then logs in;
    /// `same_user_first` has a program of this user (as a Snap app of the person's
    /// may: same uid, host pid namespace) find the address the same way and open
    /// it at once, log in as Ola at the provider a second later (its own login
    /// there), and follow the redirect, while the person's browser opens the
    /// same address after it and takes three seconds at the provider as Kari;
    /// it writes the person's statuses to FORGE_OUT.person and that program's
    /// lines to FORGE_OUT.same. It writes the redirect_uri to FORGE_OUT.
    static let forgingBrowser = #"""
        #!/usr/bin/python3
        import http.client, os, subprocess, sys, time, urllib.error, urllib.parse, urllib.request
        # Another user (nobody) when run as root; else this user.
        OTHER = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if os.geteuid() == 0 else []
        FOLLOW = r"""
        def follow(url):
            # vaultd's launch page answers its first request with the provider's address.
            parts = urllib.parse.urlsplit(url)
            if parts.hostname != "127.0.0.1" or not parts.path.startswith("/login/"):
                return url, None
            conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
            conn.request("GET", parts.path)
            r = conn.getresponse()
            r.read()
            conn.close()
            return r.getheader("Location"), r.status
        """
        exec(FOLLOW)
        launch = sys.argv[1]
        mode = os.environ["FORGE_MODE"]
        iss = os.environ.get("FORGE_ISS", "")
        def redirect_uri(url):
            q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query))
            with open(os.environ["FORGE_OUT"], "w") as f:
                f.write(q["redirect_uri"] if "redirect_uri" in q else launch)
            return q
        if mode not in ("other_user_logs_in", "same_user_first"):
            url, _ = follow(launch)
            q = redirect_uri(url)
        HOLDER = r"""
        import os, socket, sys, time
        port, n, enough = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
        held = []
        for i in range(n):
            s = socket.create_connection(("127.0.0.1", port), timeout=20)
            if i % 2:
                s.send(b"GET /callback?state=")
            s.setblocking(False)  # a peek below answers at once (with a timeout set, Python waits first)
            held.append(s)
        def closed(s):
            try:
                return s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
            except (BlockingIOError, InterruptedError):
                return False
            except OSError:
                return True
        deadline = time.time() + 30
        while True:
            count = sum(closed(s) for s in held)
            if count >= enough or time.time() > deadline:
                break
            time.sleep(0.05)
        print(count, os.getuid(), flush=True)
        time.sleep(60)  # holds the rest while the browser logs in, then stops by itself
        """
        # Finds the login's address on a browser's command line (the launch page, or
        # the provider's address itself), opens it, and after argv[1] seconds logs
        # in there as Ola, following the provider's redirect as a browser would.
        # It reads every process's command line, as `ps` does, and takes the one of
        # the browser pid argv[2] (other logins may run on the machine beside this one).
        SNOOPER = r"""
        import http.client, os, sys, time, urllib.error, urllib.parse, urllib.request
        """ + FOLLOW + r"""
        address = None
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    args = f.read().split(b"\0")
            except OSError:
                continue
            found = next((a.decode() for a in args if a.startswith(b"http") and (b"/login/" in a or b"state=" in a)), None)
            if found and pid == sys.argv[2]:
                address = found
        print(os.getuid(), address is not None, flush=True)
        if address:
            try:
                provider, status = follow(address)
                print("opened", status, flush=True)
                time.sleep(float(sys.argv[1]))
                answer = urllib.request.urlopen(provider + "&test_user=ola", timeout=30).status
            except urllib.error.HTTPError as e:
                answer = e.code
            except Exception as e:
                answer = type(e).__name__
            print(answer, flush=True)
        """
        try:
            if mode == "other_user_logs_in":
                snooper = subprocess.run(OTHER + [sys.executable, "-c", SNOOPER, "0", str(os.getpid())], stdin=subprocess.DEVNULL,
                                         capture_output=True, text=True, timeout=60)
                with open(os.environ["FORGE_OUT"] + ".other", "w") as f:
                    f.write(snooper.stdout)
                url, _ = follow(launch)
                redirect_uri(url)
                os.execv(os.environ["FORGE_REAL"], [os.environ["FORGE_REAL"], url])
            if mode == "same_user_first":
                snooper = subprocess.Popen([sys.executable, "-c", SNOOPER, "1", str(os.getpid())], stdin=subprocess.DEVNULL,
                                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
                said = [snooper.stdout.readline(), snooper.stdout.readline()]  # found it; opened it
                url, status = follow(launch)
                redirect_uri(url or "")
                person = [str(status)]
                if url:
                    time.sleep(3)  # the person at BankID
                    try:
                        person.append(str(urllib.request.urlopen(url + "&test_user=kari", timeout=30).status))
                    except urllib.error.HTTPError as e:
                        person.append(str(e.code))
                    except Exception as e:
                        person.append(type(e).__name__)
                said.append(snooper.stdout.readline())
                snooper.wait(timeout=60)
                with open(os.environ["FORGE_OUT"] + ".person", "w") as f:
                    f.write(" ".join(person))
                with open(os.environ["FORGE_OUT"] + ".same", "w") as f:
                    f.write("".join(said))
                sys.exit(0)
            if mode == "held_then_real":
                port = urllib.parse.urlsplit(q["redirect_uri"]).port
                holder = subprocess.Popen(OTHER + [sys.executable, "-c", HOLDER, str(port), "96", "96" if OTHER else "64"],
                                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                          text=True, start_new_session=True)
                with open(os.environ["FORGE_OUT"] + ".held", "w") as f:
                    f.write(holder.stdout.readline())
                os.execv(os.environ["FORGE_REAL"], [os.environ["FORGE_REAL"], url])
            if mode == "stray_then_real":
                forged = [("code", "forged-code"), ("state", "not-the-state-of-this-login"), ("iss", iss)]
                try:
                    status = urllib.request.urlopen(q["redirect_uri"] + "?" + urllib.parse.urlencode(forged), timeout=30).status
                except urllib.error.HTTPError as e:
                    status = e.code
                with open(os.environ["FORGE_OUT"] + ".stray", "w") as f:
                    f.write(str(status))
                os.execv(os.environ["FORGE_REAL"], [os.environ["FORGE_REAL"], url])
            if mode == "stall":
                urllib.request.urlopen(url, timeout=10).read()
                sys.exit(0)
            if mode == "forged_state":
                params = [("code", "forged-code"), ("state", "not-the-state-of-this-login"), ("iss", iss)]
            else:
                params = [("code", "forged-code"), ("state", q["state"]), ("state", q["state"]), ("iss", iss)]
            urllib.request.urlopen(q["redirect_uri"] + "?" + urllib.parse.urlencode(params), timeout=30).read()
        except Exception as e:
            print(e, file=sys.stderr)
        """#

    func installForgingBrowser(_ v: VaultdProcess) throws -> String {
        let path = v.root + "/forging-browser"
        try OIDCRedirectTests.forgingBrowser.write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o755)
        return path
    }

    /// True when something accepts TCP connections on 127.0.0.1:port.
    func loopbackPortAccepts(_ port: UInt16) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = port.bigEndian
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        return rc == 0
    }

    func redirectPort(_ file: String) throws -> UInt16 {
        let uri = try String(contentsOfFile: file, encoding: .utf8)
        guard let port = URLComponents(string: uri)?.port, let p = UInt16(exactly: port) else {
            throw IntegrationError("no port in redirect_uri \(uri)")
        }
        return p
    }

    func forgedLogin(_ v: VaultdProcess, provider: TestProvider, mode: String,
                     timeout: Double = 45) throws -> (CtlRun, UInt16) {
        let browser = try installForgingBrowser(v)
        let out = v.root + "/redirect-\(mode).txt"
        let r = ctl(v, ["login", provider.profile, "--browser", browser, "--json"], stdin: "n\n",
                    env: ["FORGE_MODE": mode, "FORGE_OUT": out, "FORGE_ISS": provider.issuer,
                          "FORGE_REAL": TestProvider.browser], timeout: timeout)
        return (r, try redirectPort(out))
    }

    // MARK: Redirects

    func testNoRedirectWithinTheRedirectTimeoutTimesOutAndClosesTheListener() throws {
        let bankid = try startProvider("bankid")
        let v = try startVaultd(providers: [bankid], tableExtra: ["bankid": "redirect_timeout = 2"])
        let (r, port) = try forgedLogin(v, provider: bankid, mode: "stall")
        assertLoginFails(r, code: "timeout", message: OIDCErrorTests.timedOut)
        XCTAssertGreaterThanOrEqual(r.seconds, 1.5, "waited for the redirect: \(r)")
        XCTAssertLessThan(r.seconds, 10, "gave up at redirect_timeout: \(r)")
        XCTAssertEqual(int(try bankid.stats()["requests"]?["login_page"]), 1, "the person saw the login page")
        XCTAssertFalse(loopbackPortAccepts(port), "the loopback listener on \(port) is closed after the timeout")
        try assertNothingStored(v)
        let ok = login(v, "bankid")
        XCTAssertEqual(ok.exit, 0, "no stale pending login: \(ok)")
    }

    /// Any local process may reach the loopback port: a redirect without this
    /// login's state is answered 400 and ignored, and the login goes on.
    func testForgedRedirectIsIgnoredAndTheRealOneLogsIn() throws {
        let bankid = try startProvider("bankid")
        let v = try startVaultd(providers: [bankid])
        let out = v.root + "/redirect-stray_then_real.txt"
        let (r, _) = try forgedLogin(v, provider: bankid, mode: "stray_then_real")
        XCTAssertEqual(r.exit, 0, "the login should survive a forged redirect: \(r)")
        XCTAssertEqual(try String(contentsOfFile: out + ".stray", encoding: .utf8), "400")
        XCTAssertEqual(int(try bankid.stats()["requests"]?["token"]), 1, "only the real code is exchanged")
        XCTAssertFalse(v.log.contains("not-the-state-of-this-login"), "the forged state was logged")
        XCTAssertTrue(v.log.contains("without this login's state"), "the ignored request is noted: \(v.log)")
    }

    /// Another user on the computer holds connections to the redirect port open
    /// while the login waits, sending nothing: each held a descriptor and
    /// buffers in vaultd until the login ended. Another user's connections are
    /// now refused as they come; the person's own programs (a sandboxed app
    /// with the network, when not run as root here) hold at most 32, the
    /// oldest silent one closed for each new one, so the person's browser still
    /// gets in while 32 are held.
    func testConnectionsHeldByAnotherUserDoNotPileUpOrKeepTheBrowserOut() throws {
        let bankid = try startProvider("bankid")
        let v = try startVaultd(providers: [bankid])
        let out = v.root + "/redirect-held_then_real.txt"
        let (r, _) = try forgedLogin(v, provider: bankid, mode: "held_then_real", timeout: 120)
        XCTAssertEqual(r.exit, 0, "the browser logged in beside the held connections: \(r)")
        let held = try String(contentsOfFile: out + ".held", encoding: .utf8).split(separator: " ").compactMap {
            Int($0.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        XCTAssertEqual(held.count, 2, "the holder said what it saw: \(held)")
        XCTAssertEqual(int(try bankid.stats()["requests"]?["token"]), 1, "the real code was exchanged")
        if getuid() == 0 {
            XCTAssertEqual(held.last, 65534, "the connections were another user's")
            XCTAssertEqual(held.first, 96, "vaultd refused every one of the other user's 96 connections")
            XCTAssertTrue(v.log.contains("connection(s) to the redirect port from another user's programs"),
                          "the refused connections are noted: \(v.log)")
        } else {
            XCTAssertGreaterThanOrEqual(held.first ?? 0, 96 - 32, "vaultd held at most 32 of the 96 silent connections")
            XCTAssertTrue(v.log.contains("sent no request in time"), "the closed connections are noted: \(v.log)")
        }
    }

    /// The login's address is on the browser's command line, which every user of
    /// the computer can read. When it was the provider's (its `state`, PKCE
    /// challenge and nonce), another user who logged in with it as themselves had
    /// their browser follow the provider's redirect to vaultd's port: that
    /// redirect carried the right `state` and a code for vaultd's own PKCE
    /// challenge, so vaultd took it, and the person's vault was logged in as the
    /// other user (on a vault with no owner yet, that user became its owner).
    /// It is now the one-time launch page, which another user cannot even open
    /// first: the port serves only this user's own programs, so the person's
    /// browser opens it once and logs in.
    func testAnotherUserWithTheLoginsAddressCannotAnswerTheRedirect() throws {
        guard getuid() == 0 else { throw cannotRunHere("another user is played with setpriv, which needs root") }
        let bankid = try startProvider("bankid")
        let v = try startVaultd(providers: [bankid])
        let out = v.root + "/redirect-other_user_logs_in.txt"
        let (r, _) = try forgedLogin(v, provider: bankid, mode: "other_user_logs_in", timeout: 90)
        let other = try String(contentsOfFile: out + ".other", encoding: .utf8).split(separator: "\n").map(String.init)
        XCTAssertEqual(other.first, "65534 True", "another user found the login's address in the browser's command line: \(other)")
        XCTAssertEqual(other.count, 2, "the other user said how opening the address went: \(other)")
        XCTAssertNotEqual(other.last, "200", "vaultd answered the other user's redirect as the login's: \(other)")
        XCTAssertEqual(r.exit, 0, "the person's own browser logged in: \(r)")
        XCTAssertEqual(r.json?["claims"]?["name"], "Kari Nordmann", "the vault was logged in as someone else: \(r)")
        XCTAssertFalse(try sessions(v).contains { $0["name"] == "Ola Nordmann" }, "the other user's session was stored")
        XCTAssertEqual(int(try bankid.stats()["requests"]?["token"]), 1, "only the person's code was exchanged")
        XCTAssertTrue(v.log.contains("connection(s) to the redirect port from another user's programs"),
                      "the refused connection is noted: \(v.log)")
    }

    /// The login's address on the browser's command line can be read by every
    /// program of the person too, a Snap app among them (same uid, the host's pid
    /// namespace: its AppArmor profile lets it read `/proc/PID/cmdline` of the
    /// person's processes), and the port serves the person's programs. With the
    /// provider's address there, such a program logged in at the provider as
    /// someone else with the login's own request and brought the redirect back
    /// while the person was still at the provider: the vault was logged in as
    /// Ola. The browser now gets a one-time launch page: the program that opens it
    /// first gets the provider's address, and when the person's browser opens it
    /// too the login ends for both, with a sentence that says so.
    func testAProgramOfThisUserThatOpensTheLoginsAddressFirstCannotFinishIt() throws {
        let bankid = try startProvider("bankid")
        let v = try startVaultd(providers: [bankid])
        let out = v.root + "/redirect-same_user_first.txt"
        let (r, _) = try forgedLogin(v, provider: bankid, mode: "same_user_first", timeout: 90)
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline, !FileManager.default.fileExists(atPath: out + ".same") { usleep(100_000) }
        let same = try String(contentsOfFile: out + ".same", encoding: .utf8).split(separator: "\n").map(String.init)
        let person = try String(contentsOfFile: out + ".person", encoding: .utf8)
        XCTAssertEqual(same.first, "\(getuid()) True", "the program found the login's address on the browser's command line: \(same)")
        XCTAssertEqual(same.count, 3, "it said how each step went: \(same)")
        XCTAssertEqual(same.dropFirst().first, "opened 302", "it opened the address before the person's browser: \(same)")
        XCTAssertNotEqual(same.last, "200", "vaultd answered the program's redirect as the login's: \(same)")
        XCTAssertEqual(person, "410", "the person's browser was told the page was opened twice")
        assertLoginFails(r, code: "login_failed", message: Messages.loginPageOpenedTwice.en)
        XCTAssertFalse(try sessions(v).contains { $0["name"] == "Ola Nordmann" }, "the program's login was stored")
        try assertNothingStored(v)
        XCTAssertEqual(int(try bankid.stats()["requests"]?["token"]), 0, "no code was exchanged")
        XCTAssertTrue(v.log.contains("the login page was opened twice"), "the reason is in vaultd's log: \(v.log)")
        XCTAssertEqual(login(v, bankid.profile).exit, 0, "the next login, opened once, logs in")
    }

    /// What vaultd sends a client to open is the login's launch page, and the
    /// only origin it names as openable is that page's: not the provider's
    /// (a plugin's `open_url` at the provider's authorization endpoint, with a
    /// request of its own, is only printed), and none once the login is over.
    func testTheClientIsSentOnlyTheLaunchPageToOpen() throws {
        let bankid = try startProvider("bankid")
        let v = try startVaultd(providers: [bankid])
        let c = try RawClient(path: v.socketPath)
        defer { c.close() }
        try c.hello(interactive: true)
        var sent: (url: String, origins: [String])?
        let r = try c.call("login", ["provider": .string(bankid.profile)], timeout: 30) { prompt in
            if prompt.kind == .openURL, let url = prompt.extra["url"]?.stringValue {
                sent = (url, (prompt.extra["origins"]?.arrayValue ?? []).compactMap(\.stringValue))
                _ = try? runProcess(TestProvider.browser, [url], env: childEnvironment(["TEST_USER": "kari"]), timeout: 30)
            }
            return prompt.kind == .confirm ? .value(false) : .none
        }
        XCTAssertEqual(r["result"]?["account"]?.stringValue?.isEmpty, false, "the login through the launch page logged in: \(r.text)")
        let (url, origins) = try XCTUnwrap(sent, "an open_url prompt came")
        XCTAssertNotNil(url.wholeMatch(of: #/http://127\.0\.0\.1:\d+/login/[A-Za-z0-9_-]{43}/#), url)
        XCTAssertEqual(origins, [WebOrigin.of(url) ?? "?"], "only the launch page's origin is openable")
        XCTAssertFalse(origins.contains(WebOrigin.of(bankid.issuer) ?? "?"), "the provider's origin is openable")
        XCTAssertEqual(int(try bankid.stats()["requests"]?["token"]), 1)
    }

    /// A sandboxed app that starts a login was relayed its page (`open_url`), whose
    /// address carries the login's `state`: it could answer the redirect port before
    /// the person's browser, with a code of its own getting (one it got by logging in
    /// as someone else with the same request: on a new vault that someone would
    /// become its owner). The app here sends a code of its own at once, as the
    /// person logs in: without the change it was sent the page and its code was
    /// taken as the redirect, and the person's login was lost. A confined app is
    /// never sent the page: it asks vaultd to open it (`"prompter": "vault"`).
    func testASandboxedAppIsNeverSentTheLoginPage() throws {
        let bankid = try startProvider("bankid")
        let v = try startVaultd(providers: [bankid], tableExtra: ["bankid": "redirect_timeout = 5"])
        let starts = """
            import json, socket, sys, urllib.error, urllib.parse, urllib.request
            s = socket.socket(socket.AF_UNIX)
            s.settimeout(60)
            s.connect(sys.argv[1])
            f = s.makefile("rb")
            def send(o):
                s.sendall(json.dumps(o).encode() + b"\\n")
            send({"id": 1, "op": "hello", "version": 1, "interactive": True})
            json.loads(f.readline())
            send({"id": 2, "op": "login", "provider": "\(bankid.profile)"})
            kinds, injected = [], None
            while True:
                m = json.loads(f.readline())
                if m.get("event") == "prompt":
                    p = m["prompt"]
                    kinds.append(p.get("kind"))
                    if p.get("kind") == "open_url":
                        try:  # opens it before the person's browser could
                            injected = urllib.request.urlopen(p["url"], timeout=30).status
                        except urllib.error.HTTPError as e:
                            injected = e.code
                    elif p.get("kind") != "message":
                        send({"id": "a", "op": "answer", "pid": p["pid"], "cancel": True})
                elif m.get("id") == 2:
                    print(json.dumps({"prompts": kinds, "injected": injected, "answer": m}))
                    break
            """
        let r = try runSandboxed(appID: "org.example.Nabo", script: starts, socketPath: v.socketPath, scratch: v.root)
        guard let last = r.out.split(separator: "\n").last, let said = try? JSON.parse(String(last)) else {
            return XCTFail("the sandboxed app said nothing readable: \(r.out) \(r.err)")
        }
        XCTAssertFalse(said["prompts"]?.arrayValue?.contains("open_url") ?? true, "the login's page was sent to a sandboxed app: \(r.out) \(r.err)")
        XCTAssertEqual(said["injected"], .null, "the sandboxed app answered the redirect port: \(r.out)")
        XCTAssertEqual(said["answer"]?["error"]?["code"], "bad_request", r.out)
        XCTAssertEqual(said["answer"]?["error"]?["message"]?.stringValue,
                       "Logging in with BankID needs a browser. Start the login from your app", r.out)
        XCTAssertEqual(int(try bankid.stats()["requests"]?["token"]), 0, "no code was exchanged")
        // The control: the person's own vaultctl is sent the page and logs in.
        XCTAssertEqual(login(v, bankid.profile).exit, 0)
    }

    func testOnlyForgedRedirectsTimeOut() throws {
        let bankid = try startProvider("bankid")
        let v = try startVaultd(providers: [bankid], tableExtra: ["bankid": "redirect_timeout = 3"])
        let (r, port) = try forgedLogin(v, provider: bankid, mode: "forged_state")
        assertLoginFails(r, code: "timeout", message: OIDCErrorTests.timedOut)
        XCTAssertGreaterThanOrEqual(r.seconds, 2.5, "kept waiting after the forged redirect: \(r)")
        XCTAssertEqual(int(try bankid.stats()["requests"]?["token"]), 0, "a forged code is never exchanged")
        XCTAssertFalse(loopbackPortAccepts(port), "the loopback listener on \(port) is closed")
        try assertNothingStored(v)
    }

    /// Whoever repeats the right state tampered with the real redirect: that
    /// still ends the login as forged.
    func testDuplicatedStateIsStateMismatch() throws {
        let bankid = try startProvider("bankid")
        let v = try startVaultd(providers: [bankid])
        let (dup, port) = try forgedLogin(v, provider: bankid, mode: "dup_state")
        assertLoginFails(dup, code: "state_mismatch", message: OIDCErrorTests.stateMismatch)
        XCTAssertEqual(int(try bankid.stats()["requests"]?["token"]), 0)
        XCTAssertFalse(loopbackPortAccepts(port), "the loopback listener on \(port) is closed")
        try assertNothingStored(v)

        let ok = login(v, "bankid")
        XCTAssertEqual(ok.exit, 0, "\(ok)")
    }

    func testMissingIssParameterIsStateMismatch() throws {
        let bankid = try startProvider("bankid")
        let v = try startVaultd(providers: [bankid])
        try bankid.behave(["no_iss_parameter": ["value": true, "times": 1]])
        let r = login(v, "bankid")
        assertLoginFails(r, code: "state_mismatch", message: OIDCErrorTests.stateMismatch)
        XCTAssertEqual(int(try bankid.stats()["requests"]?["token"]), 0)
        try assertNothingStored(v)
    }

    // MARK: More ID token defects

    func testMoreIDTokenDefectsAreTokenInvalid() throws {
        let bankid = try startProvider("bankid")
        let v = try startVaultd(providers: [bankid])
        for name in ["missing_nonce", "wrong_at_hash", "iat_in_future", "extra_aud"] {
            try bankid.behave([name: ["value": true, "times": 1, "grant": "authorization_code"]])
            let r = login(v, "bankid")
            assertLoginFails(r, code: "token_invalid", message: OIDCErrorTests.tokenInvalid)
            XCTAssertEqual(int(try bankid.stats()["behaviours_applied"]?[name]), 1, "\(name) took effect")
            try assertNothingStored(v, "(\(name))")
        }
        // Bad discovery: the issuer in the document is not the configured one.
        let fresh = try startVaultd(providers: [bankid])
        try bankid.behave(["discovery_issuer_mismatch": ["value": true, "times": 1]])
        let d = login(fresh, "bankid")
        assertLoginFails(d, code: "provider_unavailable", message: OIDCErrorTests.bankIDUnavailableAlone)
        try assertNothingStored(fresh)
    }

    // MARK: Minimum age

    func testUnderTheMinimumAgeNothingIsStored() throws {
        let bankid = try startProvider("bankid")
        let vipps = try startProvider("vipps")
        let v = try startVaultd(providers: [bankid, vipps], tableExtra: ["bankid": "min_age = 18", "vipps": "min_age = 18"])
        let message = "You must be at least 18 to use this service"
        let b = login(v, "bankid", user: "ung")
        assertLoginFails(b, code: "age_requirement", message: message)
        try assertNothingStored(v, "(BankID, minor)")
        let w = login(v, "vipps", user: "ung")
        assertLoginFails(w, code: "age_requirement", message: message)
        try assertNothingStored(v, "(Vipps, minor)")
        let ok = login(v, "bankid", user: "kari")
        XCTAssertEqual(ok.exit, 0, "an adult passes: \(ok)")
    }

    // MARK: Refreshes that cannot happen

    /// Vipps has no refresh tokens: once the access token is over, the session
    /// has expired — with no call to the provider.
    func testVippsSessionExpiresWithoutARefreshCall() throws {
        let vipps = try startProvider("vipps")
        try vipps.admin("config", ["access_ttl": 6])
        let v = try startVaultd(providers: [vipps])
        let r = login(v, "vipps")
        XCTAssertEqual(r.exit, 0, "\(r)")
        let tokenRequests = int(try vipps.stats()["requests"]?["token"])
        // Wait until fewer than 5 s are left (vaultd stops serving a token then).
        usleep(2_200_000)
        let t = ctl(v, ["token", "--json"], stdin: nil)
        XCTAssertEqual(t.exit, 5, "\(t)")
        XCTAssertEqual(t.errorCode, "session_expired", "\(t)")
        XCTAssertEqual(t.errorMessage, OIDCSessionTests.expiredMessage, "\(t)")
        XCTAssertEqual(int(try vipps.stats()["requests"]?["token"]), tokenRequests, "no refresh call to Vipps")
        XCTAssertEqual(try sessions(v).count, 0, "the session is gone")
    }

    /// The provider is down at refresh time while the access token still works:
    /// the app gets the token it has, and the session stays.
    func testProviderDownAtRefreshServesTheStillValidToken() throws {
        let bankid = try startProvider("bankid")
        try bankid.admin("config", ["access_ttl": 40])
        let v = try startVaultd(providers: [bankid])
        let r = login(v, "bankid")
        XCTAssertEqual(r.exit, 0, "\(r)")
        let token = try XCTUnwrap(r.json?["access_token"]?.stringValue)
        bankid.stop()
        let t = ctl(v, ["token"], stdin: nil)
        XCTAssertEqual(t.exit, 0, "\(t)")
        XCTAssertEqual(t.out.trimmingCharacters(in: .whitespacesAndNewlines), token)
        XCTAssertLessThan(t.seconds, 5, "\(t)")
        XCTAssertEqual(try sessions(v).count, 1, "the session is kept")
    }
}
