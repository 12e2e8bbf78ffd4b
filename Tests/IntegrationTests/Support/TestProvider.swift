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
        let (_, answer) = try loopbackHTTP(issuer + "/_admin/" + path, json: body)
        return try XCTUnwrap(answer, "admin \(path): no JSON answer")
    }

    /// GET /userinfo with a bearer token, as an app would; returns the status and the parsed body.
    func userinfo(accessToken: String) throws -> (status: Int, body: JSON?) {
        try loopbackHTTP(issuer + "/userinfo", bearer: accessToken)
    }

    func behave(_ behaviours: JSON) throws { try admin("behavior", behaviours) }
    func stats() throws -> JSON { try admin("stats") }

    /// The `[providers.NAME]` config table for vaultd.
    func configTable(name: String? = nil, extra: String = "") -> String {
        "[providers.\(name ?? profile)]\nprofile = \"\(profile)\"\nissuer = \"\(issuer)\"\nclient_id = \"\(clientID)\"\n\(extra)\n"
    }
}

/// One HTTP request to a test server on 127.0.0.1: a GET, or a POST of `json`
/// or of a form. Returns the status and the parsed JSON answer (nil when the
/// body is not JSON).
func loopbackHTTP(_ address: String, json: JSON? = nil, form: [(String, String)]? = nil,
                  bearer: String? = nil) throws -> (status: Int, body: JSON?) {
    let url = try XCTUnwrap(URL(string: address))
    var request = URLRequest(url: url, timeoutInterval: 10)
    if let json {
        request.httpMethod = "POST"
        request.httpBody = Data(json.serialized())
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
    } else if let form {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        let body = form.map { "\($0.0)=\($0.1.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")" }
        request.httpMethod = "POST"
        request.httpBody = Data(body.joined(separator: "&").utf8)
        request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
    }
    if let bearer { request.setValue("Bearer " + bearer, forHTTPHeaderField: "Authorization") }
    let result = Locked<Result<(Int, Data), any Error>?>(nil)
    let done = DispatchSemaphore(value: 0)
    URLSession.shared.dataTask(with: request) { data, response, error in
        result.withLock {
            $0 = error.map { .failure($0) } ?? .success(((response as? HTTPURLResponse)?.statusCode ?? 0, data ?? Data()))
        }
        done.signal()
    }.resume()
    guard done.wait(timeout: .now() + 15) == .success, let r = result.withLock({ $0 }) else {
        throw IntegrationError("\(address) did not answer in 15 s")
    }
    let (status, data) = try r.get()
    return (status, try? JSON.parse(Array(data)))
}
