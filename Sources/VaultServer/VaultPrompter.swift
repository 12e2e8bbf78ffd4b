import VaultCore
import VaultProtocol
import VaultWire

// The server's whole part in `"prompter": "vault"` (docs/protocol.md): hello
// records the choice and where the client is shown; requests on such a
// connection get the conversation vaultd's composition root injects (its own
// pinentry dialogs) instead of the prompt-event relay. Kept in one place so
// it moves as one piece.

/// What a client's hello said about its prompts: `"prompter": "vault"` and
/// the display its dialogs belong on (like gpg's UPDATESTARTUPTTY).
public struct PromptContext: Sendable {
    public var language: Language
    public var requester: Requester
    public var display: String?
    public var waylandDisplay: String?
    public var tty: String?
    /// The terminal type of `tty` (`TERM`), for pinentry-curses.
    public var term: String?
    /// Fired when the client disconnects: its dialogs close (the request is gone).
    public var hangup: Hangup

    public init(language: Language, requester: Requester, display: String? = nil, waylandDisplay: String? = nil,
                tty: String? = nil, term: String? = nil, hangup: Hangup = Hangup()) {
        self.hangup = hangup
        self.language = language
        self.requester = requester
        self.display = display
        self.waylandDisplay = waylandDisplay
        self.tty = tty
        self.term = term
    }
}

/// Makes the conversation for one request of a client that said `"prompter": "vault"`.
public typealias VaultPrompterFactory = @Sendable (PromptContext) -> any ClientConversation

/// The prompter fields of one hello.
struct HelloPrompter: Sendable, Equatable {
    var vault = false
    var display: String?
    var waylandDisplay: String?
    var tty: String?
    var term: String?

    init() {}

    init(_ request: Request) {
        vault = request["prompter"]?.stringValue == "vault"
        display = Self.field(request, "display")
        waylandDisplay = Self.field(request, "wayland_display")
        // Only a terminal device: the value becomes pinentry's --ttyname.
        tty = Self.field(request, "tty").flatMap { $0.hasPrefix("/dev/") && !$0.contains("..") ? $0 : nil }
        term = Self.field(request, "term")
    }

    /// A short printable value, or nil (it goes into pinentry's environment and arguments).
    static func field(_ request: Request, _ key: String) -> String? {
        guard let s = request[key]?.stringValue, !s.isEmpty, s.utf8.count <= 256,
              s.unicodeScalars.allSatisfy({ $0.value >= 0x21 && $0.value < 0x7F }) else { return nil }
        return s
    }

    /// The injected conversation, when this client asked for vaultd's dialogs and vaultd has them.
    func conversation(_ factory: VaultPrompterFactory?, language: Language, requester: Requester,
                      hangup: Hangup) -> (any ClientConversation)? {
        guard vault, let factory else { return nil }
        // A sandboxed or unidentified app could name a display it controls and
        // answer vaultd's dialog there itself: its hints are dropped, and the
        // dialog goes to vaultd's own graphical session (the environment the
        // user manager gave it). An unconfined process could run pinentry on
        // any display anyway; its hints put the dialog where its person is
        // (a terminal's tty for pinentry-curses, another seat's display).
        guard !requester.isConfined else {
            return factory(PromptContext(language: language, requester: requester, hangup: hangup))
        }
        return factory(PromptContext(language: language, requester: requester, display: display,
                                     waylandDisplay: waylandDisplay, tty: tty, term: term, hangup: hangup))
    }
}
