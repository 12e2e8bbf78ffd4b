import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import VaultProtocol
import Locking
import VaultTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The strict test OIDC provider (Tests/providers/strict_provider.py) as a child
/// process on 127.0.0.1, with its admin API. Needs the venv made by
/// scripts/provider-venv (the test command makes it).
final class TestProvider {
    let process: Process
    let issuer: String
    let profile: String
    let clientID = "sessionvault-test"

    static var python: String? {
        let venv = repositoryRoot + "/.venv/bin/python"
        return FileManager.default.isExecutableFile(atPath: venv) ? venv : nil
    }

    /// The scripted browser vaultctl is given with `--browser`.
    static var browser: String { repositoryRoot + "/scripts/demo-browser" }

    init(profile: String, arguments: [String] = []) throws {
        self.profile = profile
        (process, issuer) = try startPythonProvider(
            "strict_provider.py",
            ["--profile", profile, "--watch-pid", "\(getpid())", "--idle-exit", "300"]
                + (SecretLedger.issuedLog(profile).map { ["--issued-log", $0] } ?? []) + arguments,
            timeout: 20)
    }

    deinit { stop() }

    func stop() {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
    }

    /// POSTs or GETs the admin API; returns the parsed answer.
    @discardableResult
    func admin(_ path: String, _ body: JSON? = nil) throws -> JSON {
        let url = try XCTUnwrap(URL(string: issuer + "/_admin/" + path))
        var request = URLRequest(url: url, timeoutInterval: 10)
        if let body {
            request.httpMethod = "POST"
            request.httpBody = Data(body.serialized())
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        let result = Locked<Result<Data, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        URLSession.shared.dataTask(with: request) { data, _, error in
            result.withLock { $0 = error.map { .failure($0) } ?? .success(data ?? Data()) }
            done.signal()
        }.resume()
        guard done.wait(timeout: .now() + 15) == .success, let r = result.withLock({ $0 }) else {
            throw IntegrationError("admin \(path) timed out")
        }
        return try JSON.parse(Array(try r.get()))
    }

    /// GET /userinfo with a bearer token, as an app would; returns the status and the parsed body.
    func userinfo(accessToken: String) throws -> (status: Int, body: JSON?) {
        let url = try XCTUnwrap(URL(string: issuer + "/userinfo"))
        var request = URLRequest(url: url, timeoutInterval: 10)
        request.setValue("Bearer " + accessToken, forHTTPHeaderField: "Authorization")
        let result = Locked<(Int, Data)?>(nil)
        let done = DispatchSemaphore(value: 0)
        URLSession.shared.dataTask(with: request) { data, response, _ in
            result.withLock { $0 = ((response as? HTTPURLResponse)?.statusCode ?? 0, data ?? Data()) }
            done.signal()
        }.resume()
        guard done.wait(timeout: .now() + 15) == .success, let (status, data) = result.withLock({ $0 }) else {
            throw IntegrationError("userinfo timed out")
        }
        return (status, try? JSON.parse(Array(data)))
    }

    func behave(_ behaviours: JSON) throws { try admin("behavior", behaviours) }
    func stats() throws -> JSON { try admin("stats") }

    /// The `[providers.NAME]` config table for vaultd.
    func configTable(name: String? = nil, extra: String = "") -> String {
        "[providers.\(name ?? profile)]\nprofile = \"\(profile)\"\nissuer = \"\(issuer)\"\nclient_id = \"\(clientID)\"\n\(extra)\n"
    }
}
