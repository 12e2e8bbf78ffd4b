import Foundation
import Histogram
import Synchronization
import VaultClient
import VaultProtocol
#if canImport(Glibc)
import Glibc
#endif

/// What the OIDC lines need from the command line.
struct OIDCBenchSetup {
    var vaultd: String
    var vaultctl: String
    var python: String?
    var providerScript: String
    var quick: Bool
    var requests: Int
}

/// The lines against a real OIDC provider: login, the 100-request stampede on
/// an expired token, and vaultd side by side with oidc-agent. Both tools hold
/// a session (each its own refresh-token family) from the same strict test
/// provider on 127.0.0.1; every process started here is stopped here.
func runOIDCLines(_ table: inout Table, _ setup: OIDCBenchSetup) throws {
    guard let python = setup.python, FileManager.default.isExecutableFile(atPath: python),
          FileManager.default.fileExists(atPath: setup.providerScript) else {
        table.add("OIDC lines (login, refresh, oidc-agent)", "skipped", "needs the provider venv: scripts/provider-venv", nil)
        return
    }
    // Long-lived tokens, so "cached" stays cached for the whole run; forced
    // refreshes ask for more than this.
    let accessTTL = 3600
    let provider = try StrictProvider(python: python, script: setup.providerScript, accessTTL: accessTTL)
    defer { provider.stop() }
    // per_app = false: vault-bench imports the session and `vaultctl token`,
    // another program, is measured reading it (as oidc-token reads oidc-agent's,
    // which has no per-app rule either).
    let daemon = try Daemon(binary: setup.vaultd, name: "oidc", config: """
        idle_timeout = 0
        per_app = false
        [fingerprint]
        reader = "none"
        [providers.generic]
        profile = "generic"
        issuer = "\(provider.issuer)"
        client_id = "\(provider.clientID)"
        client_secret = "\(provider.clientSecret)"

        """)
    defer { daemon.stop() }

    // 1. Login: the bench is the browser.
    let login = try measureLogin(daemon.socket, provider: provider, rounds: setup.quick ? 3 : 8)
    table.add("login: redirect at the loopback listener → session stored, p50", ms(login.total.p50),
              "≤ 100 ms (req. 5 s)", login.total.p50 <= 100_000_000)
    table.add("login: … of which the provider's token endpoint, p50", ms(login.providerToken.p50), "", nil)
    table.add("login: redirect → browser page answered (code exchanged, ID token verified), p50",
              ms(login.page.p50), "", nil)
    let account = login.account

    // 2. 100 concurrent requests on an expired access token.
    let stampedeRT = try provider.refreshToken(scope: "openid profile offline_access")
    let stampede = try measureExpiredStampede(daemon.socket, provider: provider, refreshToken: stampedeRT,
                                              clients: 100, rounds: setup.quick ? 2 : 10)
    let calls = stampede.tokenCalls
    table.add("100 concurrent `session` on an expired token: token-endpoint calls per round",
              calls.allSatisfy { $0 == 1 } ? "1 (all \(calls.count) rounds)" : calls.map { "\($0)" }.joined(separator: ","),
              "exactly 1", calls.allSatisfy { $0 == 1 })
    table.add("… added latency over the provider's own, p50", ms(stampede.added.p50), "≤ 2 ms", stampede.added.p50 <= 2_000_000)
    table.add("… added latency over the provider's own, p99", ms(stampede.added.p99), "", nil)
    table.add("… the provider's own token call, p50", ms(stampede.provider.p50), "", nil)
    table.add("… per round, p50: first request → token call starts / call ends → first answer / first → last answer",
              "\(ms(stampede.beforeCall.p50)) / \(ms(stampede.afterCall.p50)) / \(ms(stampede.fanOut.p50))",
              "requests sent within \(ms(stampede.sendSpread.p50))", nil)

    // 3. Side by side with oidc-agent.
    let vaultPersistent = try measurePersistent(daemon.socket, account: account, count: setup.requests)
    let perConnect = setup.quick ? 500 : 5_000
    // Like oidc-agent's lines below: connect, one request, close; a tenth as
    // warm-up. With `hello` first, as every real client sends it.
    let vaultConnect = try measureLatency(count: perConnect) { try releaseOnce(daemon.socket, account: account) }
    let forcedRounds = setup.quick ? 10 : 100
    let forcedFrame = forcedRefreshRequest(account, accessTTL: accessTTL)
    let vaultForced = try measureForcedRefresh(provider: provider, rounds: forcedRounds) {
        try forcedRefreshOnce(daemon.socket, frame: forcedFrame)
    }
    let backendForced = try measureBackendRefresh(setup, python: python, rounds: forcedRounds)
    table.add("vault: forced refresh through the organization's backend (examples/backend: Flask, SQLite), p50 / p99",
              "\(ms(backendForced.p50)) / \(ms(backendForced.p99))",
              "beside the provider's own: \(ms(vaultForced.client.p50)) / \(ms(vaultForced.client.p99))", nil)
    let cliRuns = setup.quick ? 10 : 50
    let vaultCLI = try measureCLI(setup.vaultctl, ["token", account], environment: [
        "SESSIONVAULT_SOCKET": daemon.socket, "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin",
        "LANG": "C.UTF-8", "HOME": daemon.dir,
    ], runs: cliRuns)

    guard let agentBinary = which("oidc-agent"), let gen = which("oidc-gen"), let tokenCLI = which("oidc-token") else {
        table.add("vault: cached token, persistent connection, p50 / p99", "\(us(vaultPersistent.p50)) / \(us(vaultPersistent.p99))", "", nil)
        table.add("vault: cached token, connect per request, p50 / p99", "\(us(vaultConnect.p50)) / \(us(vaultConnect.p99))", "", nil)
        table.add("vault: forced refresh (min_valid), p50 / p99", "\(ms(vaultForced.client.p50)) / \(ms(vaultForced.client.p99))", "", nil)
        table.add("vault: `vaultctl token` as a whole process, p50", ms(vaultCLI.p50), "", nil)
        table.add("vs oidc-agent", "skipped", "oidc-agent is not installed (scripts/setup installs it)", nil)
        return
    }
    let agent = try OIDCAgent(agent: agentBinary)
    defer { agent.stop() }
    let scope = "openid profile offline_access"
    try agent.addAccount(gen: gen, provider: provider, refreshToken: try provider.refreshToken(scope: scope), scope: scope)
    let cached = agent.accessTokenRequest(minValid: 0)
    guard try agent.request(cached)["status"]?.stringValue == "success",
          try agent.encryptedRequest(cached)["status"]?.stringValue == "success" else {
        throw BenchError("oidc-agent gives no access token")
    }
    let agentPlain = try measureLatency(count: perConnect) { _ = try agent.request(cached) }
    let plainRequest = plainReleaseRequest(account)
    let vaultPlain = try measureLatency(count: perConnect) { try plainRelease(daemon.socket, request: plainRequest) }
    let agentEncrypted = try measureLatency(count: setup.quick ? 200 : 2_000) { _ = try agent.encryptedRequest(cached) }
    let forced = agent.accessTokenRequest(minValid: 2 * accessTTL)
    let agentForced = try measureForcedRefresh(provider: provider, rounds: forcedRounds) {
        guard try agent.request(forced)["status"]?.stringValue == "success" else {
            throw BenchError("oidc-agent refused a forced refresh")
        }
    }
    let agentCLI = try measureCLI(tokenCLI, [agent.account], environment: agent.environment, runs: cliRuns)
    // Process start-up alone, to see how much of a whole-process line it is.
    let vaultStart = try measureCLI(setup.vaultctl, ["--version"], environment: agent.environment, runs: cliRuns)
    let agentStart = try measureCLI(tokenCLI, ["--version"], environment: agent.environment, runs: cliRuns)

    table.add("vs oidc-agent: cached token, persistent connection, p50",
              "vault \(us(vaultPersistent.p50)); oidc-agent cannot (one request per connection)",
              "faster than oidc-agent's best (\(us(agentPlain.p50)))", vaultPersistent.p50 < agentPlain.p50)
    table.add("vs oidc-agent: cached token, persistent connection, p99", "vault \(us(vaultPersistent.p99))", "", nil)
    table.add("vs oidc-agent: cached token, connect per request, p50", versus(vaultConnect.p50, agentPlain.p50, us),
              "faster than oidc-agent", vaultConnect.p50 < agentPlain.p50)
    table.add("vs oidc-agent: cached token, connect per request, p99", versus(vaultConnect.p99, agentPlain.p99, us),
              "faster than oidc-agent", vaultConnect.p99 < agentPlain.p99)
    table.add("vs oidc-agent: the same plain client on both (connect, write, read; no check of who serves), p50",
              versus(vaultPlain.p50, agentPlain.p50, us), "", nil)
    table.add("vs oidc-agent (encrypted, as liboidc-agent asks), p50", versus(vaultConnect.p50, agentEncrypted.p50, us),
              "faster than oidc-agent", vaultConnect.p50 < agentEncrypted.p50)
    table.add("vs oidc-agent: forced refresh, p50", versus(vaultForced.client.p50, agentForced.client.p50, ms),
              "faster than oidc-agent", vaultForced.client.p50 < agentForced.client.p50)
    table.add("vs oidc-agent: forced refresh, p99", versus(vaultForced.client.p99, agentForced.client.p99, ms),
              "faster than oidc-agent", vaultForced.client.p99 < agentForced.client.p99)
    table.add("… forced refresh, the provider's own token call, p50 (vault / oidc-agent runs)",
              "\(ms(vaultForced.provider.p50)) / \(ms(agentForced.provider.p50))", "", nil)
    table.add("… forced refresh, token-endpoint calls (vault / oidc-agent)",
              "\(vaultForced.calls) / \(agentForced.calls) for \(forcedRounds) requests each", "one per request",
              vaultForced.calls == forcedRounds && agentForced.calls == forcedRounds)
    table.add("vs oidc-agent: `vaultctl token` vs `oidc-token`, whole process, p50", versus(vaultCLI.p50, agentCLI.p50, ms),
              "≤ 1.5× oidc-token (issue 24)", Double(vaultCLI.p50) <= 1.5 * Double(agentCLI.p50))
    table.add("vs oidc-agent: `vaultctl token` vs `oidc-token`, whole process, p99", versus(vaultCLI.p99, agentCLI.p99, ms),
              "", nil)
    table.add("… start-up alone (`--version`), p50: vaultctl vs oidc-token", versus(vaultStart.p50, agentStart.p50, ms), "", nil)
}

/// "a vs b: vault N× faster/slower" (a is SessionVault's figure).
func versus(_ vault: UInt64, _ peer: UInt64, _ unit: (UInt64) -> String) -> String {
    let ratio = Double(peer) / Double(max(1, vault))
    let verdict = ratio >= 1 ? String(format: "vault %.1f× faster", ratio) : String(format: "vault %.1f× slower", 1 / ratio)
    return "\(unit(vault)) vs \(unit(peer)): \(verdict)"
}

func latency(_ h: Histogram<UInt64>) -> Latency { Latency(p50: h.valueAtPercentile(50), p99: h.valueAtPercentile(99)) }

/// Times `body` `count` times after a tenth as warm-up.
func measureLatency(count: Int, _ body: () throws -> Void) throws -> Latency {
    var h = Histogram<UInt64>(highestTrackableValue: 100_000_000_000)
    for i in 0..<(count + count / 10) {
        let t0 = monotonicNs()
        try body()
        if i >= count / 10 { _ = h.record(monotonicNs() - t0) }
    }
    return latency(h)
}

struct LoginFigures {
    var total: Latency
    var page: Latency
    var providerToken: Latency
    var account: String
}

/// Runs `login` ops with the bench as the browser: it GETs the launch page from
/// the `open_url` prompt (vaultd's listener answers 302 to the provider), the
/// authorization URL there (the strict provider logs `test_user` in and
/// answers 302), then GETs the loopback redirect. Timed from sending that GET
/// (the redirect hitting vaultd's listener) to the `login` op's final answer,
/// which vaultd sends after the session is stored; the browser page's answer
/// (after the code exchange and the ID-token check, before storing) is timed
/// too. One untimed login first: it fetches discovery and the JWKS. Logins are
/// rate limited to 10 a minute per client, hence few rounds.
func measureLogin(_ socket: String, provider: StrictProvider, rounds: Int) throws -> LoginFigures {
    let c = try VaultConnection(socketPath: socket)
    try c.hello(client: "vault-bench", language: .en, interactive: true)
    var total = Histogram<UInt64>(highestTrackableValue: 100_000_000_000)
    var page = Histogram<UInt64>(highestTrackableValue: 100_000_000_000)
    var providerToken = Histogram<UInt64>(highestTrackableValue: 100_000_000_000)
    var account = ""
    for round in 0...rounds {
        var redirectAt: UInt64 = 0
        var pageAt: UInt64 = 0
        var problem: String?
        let result = try c.call("login", ["provider": "generic"]) { prompt in
            switch prompt.kind {
            case .openURL:
                guard let url = prompt.extra["url"]?.stringValue else {
                    problem = "open_url prompt without a url"
                    return .none
                }
                do {
                    let launch = try HTTP.get(url)
                    guard launch.status == 302, let provider = launch.header("location") else {
                        problem = "the launch page answered \(launch.status), not a redirect"
                        return .none
                    }
                    let authorize = try HTTP.get(provider + "&test_user=kari")
                    guard authorize.status == 302, let location = authorize.header("location") else {
                        problem = "the provider answered \(authorize.status), not a redirect"
                        return .none
                    }
                    redirectAt = monotonicNs()
                    let answer = try HTTP.get(location)
                    pageAt = monotonicNs()
                    if answer.status != 200 { problem = "the loopback page answered \(answer.status)" }
                } catch {
                    problem = "\(error)"
                }
                return .none
            case .confirm: return .value(false)  // no fingerprint offer wanted
            case .message: return .none
            default: return .cancel
            }
        }
        let doneAt = monotonicNs()
        if let problem { throw BenchError("login: \(problem)") }
        guard redirectAt > 0 else { throw BenchError("login finished without the redirect") }
        account = result["account"]?.stringValue ?? account
        if round == 0 { continue }
        _ = total.record(doneAt - redirectAt)
        _ = page.record(pageAt - redirectAt)
        if let call = try provider.tokenCalls().last(where: { $0.grant == "authorization_code" && $0.start >= redirectAt }) {
            _ = providerToken.record(call.ns)
        }
    }
    guard !account.isEmpty else { throw BenchError("login gave no account") }
    return LoginFigures(total: latency(total), page: latency(page), providerToken: latency(providerToken), account: account)
}

struct StampedeFigures {
    var tokenCalls: [Int]
    var added: Latency
    var provider: Latency
    /// Per round: first request sent → the provider's call begins; the call
    /// ends → the first answer; first → last answer; first → last request sent.
    var beforeCall: Latency
    var afterCall: Latency
    var fanOut: Latency
    var sendSpread: Latency
}

/// Each round: import a session whose access token expired a minute ago (with
/// a valid refresh token), connect `clients` clients, and send `session` on
/// each at once. The provider reports its token calls with
/// start/end on CLOCK_MONOTONIC, so for every request the part of its latency
/// spent inside the provider's call is known; the rest is what vaultd added.
func measureExpiredStampede(_ socket: String, provider: StrictProvider, refreshToken: String, clients: Int,
                            rounds: Int) throws -> StampedeFigures {
    let importer = try VaultConnection(socketPath: socket)
    var added = Histogram<UInt64>(highestTrackableValue: 100_000_000_000)
    var providerTimes = Histogram<UInt64>(highestTrackableValue: 100_000_000_000)
    var beforeCall = Histogram<UInt64>(highestTrackableValue: 100_000_000_000)
    var afterCall = Histogram<UInt64>(highestTrackableValue: 100_000_000_000)
    var fanOut = Histogram<UInt64>(highestTrackableValue: 100_000_000_000)
    var sendSpread = Histogram<UInt64>(highestTrackableValue: 100_000_000_000)
    var callsPerRound: [Int] = []
    let frame = Request(id: 1, op: "session", fields: ["account": "stampede"]).encoded()
    for round in 0..<rounds {
        _ = try importer.call("import", [
            "issuer": .string(provider.issuer), "client_id": .string(provider.clientID), "account": "stampede",
            "provider": "generic", "refresh_token": .string(refreshToken), "access_token": .string("expired-\(round)"),
            "expires_at": .int(Int64(Date().timeIntervalSince1970) - 60),
        ])
        let before = try provider.tokenCalls().count
        let got = try stampede(socket, frame: frame, clients: clients)
        let calls = try provider.tokenCalls().dropFirst(before).filter { $0.grant == "refresh_token" }
        callsPerRound.append(calls.count)
        let tokens = Set(got.compactMap { $0.token })
        guard got.count == clients, got.allSatisfy({ $0.token != nil }), tokens.count == 1,
              tokens.first != "expired-\(round)" else {
            throw BenchError("stampede round \(round): \(got.filter { $0.token != nil }.count) of \(clients) got a token, \(tokens.count) distinct")
        }
        guard let call = calls.first else { continue }
        _ = providerTimes.record(call.ns)
        let sends = got.map { $0.send }, receives = got.map { $0.receive }
        if let firstSend = sends.min(), let lastSend = sends.max(), let first = receives.min(), let last = receives.max() {
            // The provider stamps its end after writing the answer, so it can trail by a hair.
            _ = beforeCall.record(call.start > firstSend ? call.start - firstSend : 0)
            _ = afterCall.record(first > call.end ? first - call.end : 0)
            _ = fanOut.record(last - first)
            _ = sendSpread.record(lastSend - firstSend)
        }
        for s in got {
            // The part of this request's wait that overlapped the provider's call.
            let overlapStart = max(s.send, call.start)
            let overlapEnd = min(s.receive, call.end)
            let inProvider = overlapEnd > overlapStart ? overlapEnd - overlapStart : 0
            _ = added.record(s.receive - s.send - inProvider)
        }
    }
    return StampedeFigures(tokenCalls: callsPerRound, added: latency(added), provider: latency(providerTimes),
                           beforeCall: latency(beforeCall), afterCall: latency(afterCall), fanOut: latency(fanOut),
                           sendSpread: latency(sendSpread))
}

/// `clients` connections, each greeted, then each sends `frame` once; every answer is stamped the
/// moment its line is read. One thread drives all of them through poll(2), as
/// wrk and h2load do: a hundred client threads on two cores would measure how
/// fast the kernel wakes them, taking vaultd's cores to do it.
func stampede(_ socket: String, frame: [UInt8], clients: Int) throws -> [(send: UInt64, receive: UInt64, token: String?)] {
    var fds: [Int32] = []
    defer { for fd in fds { close(fd) } }
    // Each app is connected and greeted first: what is measured is the
    // refresh they all wait for, not vaultd accepting a hundred connections
    // (the connect-per-request lines measure that).
    let hello = Request(id: 0, op: "hello", fields: ["client": "vault-bench"]).encoded()
    var greeting = [UInt8](repeating: 0, count: 4096)
    for _ in 0..<clients {
        guard let fd = connectUnixSocket(socket) else { throw BenchError("stampede: cannot connect to \(socket)") }
        fds.append(fd)
        guard writeAll(fd, hello) else { throw BenchError("stampede: a write failed") }
        var got: [UInt8] = []
        while got.last != UInt8(ascii: "\n") {
            let n = greeting.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { throw BenchError("stampede: vaultd closed a connection") }
            got.append(contentsOf: greeting[0..<n])
        }
    }
    var sent = [UInt64](repeating: 0, count: clients)
    var received = [UInt64](repeating: 0, count: clients)
    var lines = [[UInt8]](repeating: [], count: clients)
    for (i, fd) in fds.enumerated() {
        sent[i] = monotonicNs()
        guard writeAll(fd, frame) else { throw BenchError("stampede: a write failed") }
    }
    var polls = fds.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
    var open = clients
    var buffer = [UInt8](repeating: 0, count: 65_536)
    while open > 0 {
        guard poll(&polls, nfds_t(polls.count), 30_000) > 0 else { throw BenchError("stampede: no answer within 30 s") }
        for i in polls.indices where polls[i].revents != 0 {
            let n = buffer.withUnsafeMutableBytes { read(polls[i].fd, $0.baseAddress, $0.count) }
            guard n > 0 else { throw BenchError("stampede: vaultd closed a connection") }
            lines[i].append(contentsOf: buffer[0..<n])
            if lines[i].last == UInt8(ascii: "\n") {
                received[i] = monotonicNs()
                polls[i].fd = -1   // poll skips negative descriptors
                open -= 1
            }
        }
    }
    return (0..<clients).map { i in
        (sent[i], received[i], (try? JSON.parse(lines[i].dropLast()))?["result"]?["access_token"]?.stringValue)
    }
}

struct ForcedFigures {
    var client: Latency
    var provider: Latency
    var calls: Int
}

/// A `session` request that asks for more than the access token has left, so
/// vaultd refreshes first.
func forcedRefreshRequest(_ account: String, accessTTL: Int) -> [UInt8] {
    Request(id: 1, op: "session", fields: ["account": .string(account), "min_valid": .int(Int64(2 * accessTTL))]).encoded()
}

/// One forced refresh as an app asks for it: connect, `hello`, `session`.
func forcedRefreshOnce(_ socket: String, frame: [UInt8]) throws {
    let c = try helloConnection(socket)
    try c.send(frame)
    guard let r = try? JSON.parse(try c.readLine()), r["ok"] == .bool(true) else {
        throw BenchError("vaultd refused a forced refresh")
    }
}

/// Runs `request` (one forced refresh through a tool) `rounds` times after a
/// few warm-ups; counts the provider's refresh calls meanwhile.
func measureForcedRefresh(provider: StrictProvider, rounds: Int, _ request: () throws -> Void) throws -> ForcedFigures {
    for _ in 0..<3 { try request() }
    let before = try provider.tokenCalls().count
    var h = Histogram<UInt64>(highestTrackableValue: 100_000_000_000)
    for _ in 0..<rounds {
        let t0 = monotonicNs()
        try request()
        _ = h.record(monotonicNs() - t0)
    }
    let calls = try provider.tokenCalls().dropFirst(before).filter { $0.grant == "refresh_token" }
    var p = Histogram<UInt64>(highestTrackableValue: 100_000_000_000)
    for c in calls { _ = p.record(c.ns) }
    return ForcedFigures(client: latency(h), provider: latency(p), calls: calls.count)
}

/// Spawns a command to its end `runs` times (after 3 warm-ups), each must exit 0.
func measureCLI(_ executable: String, _ arguments: [String], environment: [String: String], runs: Int) throws -> Latency {
    var h = Histogram<UInt64>(highestTrackableValue: 100_000_000_000)
    for i in 0..<(runs + 3) {
        let t0 = monotonicNs()
        let status = try spawnAndWait(executable, arguments, environment: environment)
        let t = monotonicNs() - t0
        guard status == 0 else { throw BenchError("\(executable) \(arguments.joined(separator: " ")) exited \(status)") }
        if i >= 3 { _ = h.record(t) }
    }
    return latency(h)
}
