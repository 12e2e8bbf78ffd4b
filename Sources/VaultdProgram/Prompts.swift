import Logging
import Prompter
import VaultServer

extension VaultDaemon {
    /// vaultd's own dialogs through pinentry, for clients that say
    /// `"prompter": "vault"`: one prompter (and so one dialog on screen at a
    /// time) for every connection. A missing pinentry is logged here and
    /// said to the person at the first dialog.
    static func pinentryPrompts(_ prompter: Prompter, configured: String?, logger: Logger) -> VaultPrompterFactory {
        if let program = prompter.program {
            logger.info("vault dialogs use pinentry", metadata: ["program": "\(program)"])
        } else {
            logger.warning("no pinentry found; clients that ask vaultd to prompt will get factor_unavailable",
                           metadata: ["configured": "\(configured ?? "-")"])
        }
        return { context in
            PinentryConversation(prompter: prompter, language: context.language, requester: context.requester,
                                 display: PromptDisplay(display: context.display, waylandDisplay: context.waylandDisplay,
                                                        tty: context.tty, term: context.term),
                                 hangup: context.hangup)
        }
    }
}
