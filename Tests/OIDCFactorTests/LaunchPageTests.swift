import Foundation
import Locking
import NIOPosix
import XCTest
@testable import OIDCFactor
import VaultFactor

/// The browser is started at the loopback listener's one-time launch page: the
/// address on the browser's command line, which every program on the computer
/// can read, carries nothing of the authorization request, and a launch page
/// opened twice ends the login, whoever opened it first.
extension FlowTests {
    func testTheBrowserIsStartedAtAOneTimePageThatCarriesNothingOfTheRequest() async throws {
        stub.update { $0.idClaims = ["bankid_altsub": "altsub-kari", "acr": "urn:bankid:bid;LOA=4"] }
        let browser = BrowserConversation(action: loggingIn(stub))
        _ = try await bankID().login(browser)
        let launchURL = try XCTUnwrap(browser.launched.withLock { $0.first })
        let request = try XCTUnwrap(browser.lastRequest)
        let port = try XCTUnwrap(URLComponents(string: request.redirectURI)?.port)
        XCTAssertNotNil(launchURL.wholeMatch(of: #/http://127\.0\.0\.1:(\d+)/login/[A-Za-z0-9_-]{43}/#),
                        "a random path on the redirect listener, no query: \(launchURL)")
        XCTAssertTrue(launchURL.hasPrefix("http://127.0.0.1:\(port)/"), "on the login's own listener")
        for secret in [request.state, request.params["nonce"] ?? "?", request.params["code_challenge"] ?? "?", stub.issuer] {
            XCTAssertFalse(launchURL.contains(secret), "the launch address gives away \(secret)")
        }
        XCTAssertTrue(request.url.hasPrefix(stub.issuer + "/authorize?"), "it led to the provider: \(request.url)")
        XCTAssertEqual(browser.opened.withLock { $0.count }, 1)

        // Another login gets another launch page.
        let second = BrowserConversation(action: loggingIn(stub))
        _ = try await bankID().login(second)
        XCTAssertNotEqual(second.launched.withLock { $0.first }, launchURL)
    }

    /// Before the person's browser opens the launch page, another program that
    /// read its address (from the browser's command line) asks for it too: the
    /// login ends for both, no code is exchanged, and the one that came second
    /// is told why.
    func testALaunchPageOpenedTwiceEndsTheLogin() async throws {
        let second = Locked<(status: Int, body: String)?>(nil)
        let browser = BrowserConversation { request in
            let again = try? await browserGET(request.launchURL)
            second.withLock { $0 = again.map { ($0.status, $0.body) } }
            return await loggingIn(self.stub)(request)  // the redirect comes, too late
        }
        let failure = await assertFailure(.loginFailed) { () async throws(VaultFailure) in
            try await self.bankID().login(browser)
        }
        XCTAssertEqual(failure?.message, Messages.loginPageOpenedTwice)
        let redirected = await browser.browserResult()
        XCTAssertNotEqual(redirected?.status, 200, "the redirect after it logged nobody in")
        let page = try XCTUnwrap(second.withLock { $0 })
        XCTAssertEqual(page.status, 410)
        XCTAssertTrue(page.body.contains("The login page was opened twice"), page.body)
        XCTAssertTrue(stub.server.requests("POST /token").isEmpty, "no code was exchanged")
    }

    /// The other program was first, logged in at the provider as itself and
    /// brought that redirect back; the person's browser opens the launch page
    /// while vaultd exchanges the code: the login is not kept.
    func testALaunchPageOpenedAgainWhileTheCodeIsExchangedEndsTheLogin() async throws {
        stub.update { $0.idClaims = ["bankid_altsub": "altsub-ola", "acr": "urn:bankid:bid;LOA=4"] }
        let launch = Locked<String?>(nil)
        let latecomer = Locked<Int?>(nil)
        stub.server.route("POST /token") { [stub] request in
            if let url = launch.withLock({ $0 }) {
                let status = try? await browserGET(url).status
                latecomer.withLock { $0 = status }
            }
            return await stub!.token(request)
        }
        let browser = BrowserConversation { request in
            launch.withLock { $0 = request.launchURL }
            return await loggingIn(self.stub)(request)
        }
        let failure = await assertFailure(.loginFailed) { () async throws(VaultFailure) in
            try await self.bankID().login(browser)
        }
        XCTAssertEqual(failure?.message, Messages.loginPageOpenedTwice)
        XCTAssertEqual(latecomer.withLock { $0 }, 410, "the person's browser was told")
        XCTAssertEqual(stub.server.requests("POST /token").count, 1, "the code was exchanged; the login was still refused")
        let redirected = await browser.browserResult()
        XCTAssertEqual(redirected?.status, 200)
        XCTAssertTrue(redirected?.body.contains("The login page was opened twice") == true, redirected?.body ?? "")
    }

    /// The launch page answers only its own address, only with GET and no
    /// query, and only once its target is set; it is gone with the login.
    func testTheLaunchPageAnswersOnlyItsExactAddressOnce() async throws {
        let listener = try await LoopbackListener.start(group: MultiThreadedEventLoopGroup.singleton, port: 0,
                                                        path: "/callback", language: .en, expectedState: "s")
        let before = try await browserGET(listener.launchURL)
        XCTAssertEqual(before.status, 404, "nothing to send anyone to before the login's address is set")
        let url = listener.launch(to: "https://idp.example.test/authorize?state=s")
        XCTAssertEqual(url, listener.launchURL)
        let withQuery = try await browserGET(url + "?x=1")
        XCTAssertEqual(withQuery.status, 404)
        let otherToken = try await browserGET("http://127.0.0.1:\(listener.port)/login/" + String(repeating: "A", count: 43))
        XCTAssertEqual(otherToken.status, 404)
        let first = try await browserGET(url)
        XCTAssertEqual(first.status, 302)
        XCTAssertEqual(first.headers["location"], ["https://idp.example.test/authorize?state=s"])
        XCTAssertEqual(first.headers["cache-control"], ["no-store"])
        XCTAssertEqual(first.headers["referrer-policy"], ["no-referrer"])
        let again = try await browserGET(url)
        XCTAssertEqual(again.status, 410)
        do {
            _ = try await listener.nextRedirect(timeout: .seconds(5))
            XCTFail("the wait should have ended")
        } catch {
            XCTAssertEqual(error, .openedTwice)
        }
        XCTAssertTrue(listener.stop(), "the login ends as opened twice")
        await listener.finish(.notFound(.en))
        let after = try? await browserGET(url, timeout: .seconds(2))
        XCTAssertNil(after, "the listener is closed with the login")
    }
}
