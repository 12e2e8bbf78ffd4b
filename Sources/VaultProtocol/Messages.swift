/// Every sentence a person can meet, in English and Norwegian bokmål, each with
/// a next step. Plain text only: it must read well through a screen reader and
/// never rely on colour. The login error sentences (cancelled, unavailable, failed,
/// timed out...) are the ones the product's error table fixes, word for word:
/// tests compare them exactly.
public enum Messages {
    public static func standard(_ code: ErrorCode) -> LocalizedText {
        switch code {
        case .badRequest:
            return LocalizedText(
                en: "The request could not be understood. Check that the app is up to date and try again.",
                nb: "Forespørselen ble ikke forstått. Sjekk at appen er oppdatert, og prøv igjen.")
        case .forbidden:
            return LocalizedText(
                en: "Only the user who owns this vault may use it. Log in as that user and try again.",
                nb: "Bare brukeren som eier dette hvelvet, kan bruke det. Logg inn som den brukeren og prøv igjen.")
        case .locked:
            return LocalizedText(
                en: "The vault is locked. Unlock it with your fingerprint or PIN, or log in with BankID or Vipps.",
                nb: "Hvelvet er låst. Lås det opp med fingeravtrykk eller PIN-kode, eller logg inn med BankID eller Vipps.")
        case .noSession:
            return LocalizedText(
                en: "You are not logged in on this computer. Log in with BankID or Vipps to continue.",
                nb: "Du er ikke logget inn på denne datamaskinen. Logg inn med BankID eller Vipps for å fortsette.")
        case .notEnrolled:
            return LocalizedText(
                en: "That unlock method is not set up. Turn it on in SessionVault's settings (in your apps menu), or log in with BankID or Vipps.",
                nb: "Den opplåsingsmåten er ikke satt opp. Slå den på i SessionVaults innstillinger (i appmenyen), eller logg inn med BankID eller Vipps.")
        case .noMatch:
            return LocalizedText(en: "That did not match. Please try again.", nb: "Det stemte ikke. Prøv igjen.")
        case .lockedOut:
            return LocalizedText(
                en: "Too many wrong attempts. Wait a while, or log in with BankID or Vipps.",
                nb: "For mange feil forsøk. Vent litt, eller logg inn med BankID eller Vipps.")
        case .enrollmentChanged:
            return LocalizedText(
                en: "Your fingerprints on this computer have changed. Log in with BankID or Vipps to turn fingerprint login back on.",
                nb: "Fingeravtrykkene på denne datamaskinen er endret. Logg inn med BankID eller Vipps for å slå på fingeravtrykk igjen.")
        case .factorUnavailable:
            return LocalizedText(
                en: "That unlock method cannot be used right now. Use your PIN, or log in with BankID or Vipps.",
                nb: "Den opplåsingsmåten kan ikke brukes nå. Bruk PIN-koden, eller logg inn med BankID eller Vipps.")
        case .cancelled:
            return LocalizedText(en: "Cancelled. You can choose another way to log in.",
                                 nb: "Avbrutt. Du kan velge en annen måte å logge inn på.")
        case .providerUnavailable:
            return LocalizedText(
                en: "The login service is temporarily unavailable. Try another login method or retry later.",
                nb: "Innloggingstjenesten er midlertidig utilgjengelig. Prøv en annen innloggingsmåte eller prøv igjen senere.")
        case .loginFailed:
            return LocalizedText(en: "Login failed — please try again", nb: "Innloggingen mislyktes — prøv igjen")
        case .timeout:
            return LocalizedText(en: "The login timed out — please try again", nb: "Innloggingen tok for lang tid — prøv igjen")
        case .sessionExpired:
            return LocalizedText(en: "Your session has expired — please log in again",
                                 nb: "Økten din har utløpt — logg inn på nytt")
        case .stateMismatch:
            return LocalizedText(en: "Something went wrong — please log in again", nb: "Noe gikk galt — logg inn på nytt")
        case .tokenInvalid:
            return LocalizedText(en: "Login could not be verified — please try again",
                                 nb: "Innloggingen kunne ikke bekreftes — prøv igjen")
        case .ageRequirement:
            return LocalizedText(en: "You must be at least 18 to use this service",
                                 nb: "Du må være minst 18 år for å bruke denne tjenesten")
        case .rateLimited:
            return LocalizedText(en: "Too many attempts — wait a moment and try again",
                                 nb: "For mange forsøk — vent litt og prøv igjen")
        case .appNotAllowed:
            return appNotAllowed(nil)
        case .internal:
            return LocalizedText(
                en: "Something went wrong inside the vault. Please try again; if it keeps happening, restart vaultd.",
                nb: "Noe gikk galt i hvelvet. Prøv igjen; hvis det fortsetter, start vaultd på nytt.")
        }
    }

    public static let lockedNoFactor = LocalizedText(
        en: "The vault is locked and no unlock method is set up here. Log in with BankID or Vipps.",
        nb: "Hvelvet er låst, og ingen opplåsingsmåte er satt opp her. Logg inn med BankID eller Vipps.")

    // MARK: The at-rest rule (docs/key-hierarchy.md)

    public static let fingerprintWithoutPIN = LocalizedText(
        en: "Fingerprint login is on but no PIN is set, so anyone with a copy of your files and your keyring can open your sessions; set a PIN in SessionVault's settings (in your apps menu) to protect them.",
        nb: "Fingeravtrykk er slått på, men ingen PIN-kode er satt, så den som har en kopi av filene og nøkkelringen din, kan åpne øktene dine; lag en PIN-kode i SessionVaults innstillinger (i appmenyen) for å beskytte dem.")

    public static let sessionWaitsForPIN = LocalizedText(
        en: "Waits for your PIN: enter it when your app asks, or choose Unlock in SessionVault's settings, to use this session again.",
        nb: "Venter på PIN-koden din: skriv den inn når appen spør, eller velg Lås opp i SessionVaults innstillinger, for å bruke denne økten igjen.")

    public static let sessionWaitsForUnlock = LocalizedText(
        en: "Waits for you to unlock the vault (Unlock in SessionVault's settings).",
        nb: "Venter på at du låser opp hvelvet (Lås opp i SessionVaults innstillinger).")

    /// After a login that left a vault without a PIN locked (it did not open it:
    /// another login than the owner's): the new session works, the older ones wait.
    public static let loggedInOthersWaitForUnlock = LocalizedText(
        en: "You are logged in. Sessions saved before wait until the vault is unlocked: choose Unlock in SessionVault's settings and log in as before to use them too.",
        nb: "Du er logget inn. Økter som ble lagret før, venter til hvelvet er låst opp: velg Lås opp i SessionVaults innstillinger og logg inn som før for å bruke dem også.")

    /// After a login while locked with a PIN: the new session works, the older ones wait.
    public static let loggedInOthersWaitForPIN = LocalizedText(
        en: "You are logged in. Sessions saved before wait for your PIN: enter it to use them too.",
        nb: "Du er logget inn. Økter som ble lagret før, venter på PIN-koden din: skriv den inn for å bruke dem også.")

    /// A login at a vault locked with a PIN: what waits for the PIN (the
    /// sessions saved before, and the offer to set `thenSetUp` up again).
    public static func loggedInWaitingForPIN(sessionsWaiting: Bool, thenSetUp name: LocalizedText?) -> LocalizedText {
        guard let name else { return loggedInOthersWaitForPIN }
        return sessionsWaiting
            ? LocalizedText(
                en: "\(loggedInOthersWaitForPIN.en) After that you will be asked to set up \(name.en) again.",
                nb: "\(loggedInOthersWaitForPIN.nb) Etter det blir du spurt om å sette opp \(name.nb) igjen.")
            : LocalizedText(
                en: "You are logged in. The next time you enter your PIN, you will be asked to set up \(name.en) again.",
                nb: "Du er logget inn. Neste gang du skriver inn PIN-koden, blir du spurt om å sette opp \(name.nb) igjen.")
    }

    public static func factorRecordDamaged(_ name: LocalizedText) -> LocalizedText {
        LocalizedText(
            en: "\(name.en) setup was changed by something other than SessionVault, so it is not used. Use your PIN or log in with BankID or Vipps, then set \(name.en) up again.",
            nb: "Oppsettet for \(name.nb) ble endret av noe annet enn SessionVault og brukes derfor ikke. Bruk PIN-koden eller logg inn med BankID eller Vipps, og sett opp \(name.nb) igjen.")
    }

    public static func factorRecordNewer(_ name: LocalizedText) -> LocalizedText {
        LocalizedText(
            en: "\(name.en) was set up by a newer version of SessionVault, so this version does not use it. Update SessionVault, or use your PIN or log in with BankID or Vipps.",
            nb: "\(name.nb) ble satt opp av en nyere versjon av SessionVault, så denne versjonen bruker den ikke. Oppdater SessionVault, eller bruk PIN-koden eller logg inn med BankID eller Vipps.")
    }

    public static let identityRecordDamaged = LocalizedText(
        en: "The record of who owns this vault was changed by something other than SessionVault, so a login cannot open it. Use your fingerprint or PIN, or choose Start over in SessionVault's settings (saved sessions are lost).",
        nb: "Opplysningen om hvem som eier hvelvet, ble endret av noe annet enn SessionVault, så en innlogging kan ikke åpne det. Bruk fingeravtrykk eller PIN-kode, eller velg Begynn på nytt i SessionVaults innstillinger (lagrede økter går tapt).")

    /// No keyslot can open the vault key (every way in is gone or damaged).
    public static let vaultUnopenable = LocalizedText(
        en: "This vault cannot be opened: its unlock data is missing or damaged. Log in with BankID or Vipps to get a new session, or choose Start over in SessionVault's settings (saved sessions are lost).",
        nb: "Dette hvelvet kan ikke åpnes: opplåsingsdataene mangler eller er skadet. Logg inn med BankID eller Vipps for å få en ny økt, eller velg Begynn på nytt i SessionVaults innstillinger (lagrede økter går tapt).")

    /// Setting a changed fingerprint up again needs a strong login in this run.
    public static let reenrollNeedsStrongLogin = LocalizedText(
        en: "Fingerprint login was not turned back on: after your fingerprints changed, that needs a fresh login with BankID on a high level (code device or app). Log in with BankID, then turn it on.",
        nb: "Fingeravtrykk ble ikke slått på igjen: etter at fingeravtrykkene ble endret, krever det en ny innlogging med BankID på høyt nivå (kodebrikke eller app). Logg inn med BankID, og slå det på etterpå.")

    public static func lockedOut(seconds: Int) -> LocalizedText {
        LocalizedText(
            en: "Too many wrong attempts. Try again in \(duration(seconds, .en)), or log in with BankID or Vipps.",
            nb: "For mange feil forsøk. Prøv igjen om \(duration(seconds, .nb)), eller logg inn med BankID eller Vipps.")
    }

    // MARK: This computer's security chip (the TPM; docs/key-hierarchy.md)

    /// The chip counted too many wrong PINs and refuses, even the right one, for a while.
    public static func chipLockedOut(seconds: Int) -> LocalizedText {
        LocalizedText(
            en: "Too many wrong PINs — this computer's security chip is waiting; try again in \(duration(seconds, .en)), or log in with BankID or Vipps.",
            nb: "For mange feil PIN-koder — sikkerhetsbrikken i denne datamaskinen venter; prøv igjen om \(duration(seconds, .nb)), eller logg inn med BankID eller Vipps.")
    }
    /// A wrap bound to a chip that was cleared, or to another computer's chip.
    public static let chipReplaced = LocalizedText(
        en: "This computer's security chip was reset or replaced, so the sessions saved before cannot be opened any more. Log in with BankID or Vipps to go on; you will then be asked whether to start over.",
        nb: "Sikkerhetsbrikken i denne datamaskinen er nullstilt eller byttet, så øktene som var lagret, kan ikke åpnes lenger. Logg inn med BankID eller Vipps for å fortsette; du blir så spurt om du vil begynne på nytt.")
    public static let chipUnreachable = LocalizedText(
        en: "This computer's security chip does not answer, so the saved sessions cannot be opened now. Restart the computer and try again, or log in with BankID or Vipps.",
        nb: "Sikkerhetsbrikken i denne datamaskinen svarer ikke, så de lagrede øktene kan ikke åpnes nå. Start datamaskinen på nytt og prøv igjen, eller logg inn med BankID eller Vipps.")
    public static let chipFailed = LocalizedText(
        en: "This computer's security chip gave an unexpected answer. Try again, or log in with BankID or Vipps.",
        nb: "Sikkerhetsbrikken i denne datamaskinen ga et uventet svar. Prøv igjen, eller logg inn med BankID eller Vipps.")
    /// Asked after a login while the old chip's sessions cannot be opened.
    public static func startOverAfterChipQuestion(sessions: Int) -> LocalizedText {
        LocalizedText(
            en: "Your login worked. The \(sessions == 1 ? "session" : "\(sessions) sessions") saved before were sealed for this computer's old security chip and cannot be opened any more. Start over, so new logins are kept safely again? The old sessions and unlock methods are removed; your new login is kept.",
            nb: "Innloggingen virket. \(sessions == 1 ? "Økten" : "De \(sessions) øktene") som var lagret, ble forseglet for den gamle sikkerhetsbrikken og kan ikke åpnes lenger. Vil du begynne på nytt, så nye innlogginger lagres trygt igjen? De gamle øktene og opplåsingsmåtene fjernes; den nye innloggingen beholdes.")
    }
    /// `status`: what binds the vault to this computer.
    public static func chipInUse(withPIN: Bool) -> LocalizedText {
        withPIN
            ? LocalizedText(
                en: "This computer's security chip (TPM) guards your PIN: a copy of your files opens nothing on another computer, and wrong PINs are limited by the chip.",
                nb: "Sikkerhetsbrikken (TPM) i denne datamaskinen vokter PIN-koden din: en kopi av filene dine åpner ingenting på en annen datamaskin, og brikken begrenser feil PIN-koder.")
            : LocalizedText(
                en: "Your sessions are bound to this computer's security chip (TPM): a copy of your files opens nothing on another computer.",
                nb: "Øktene dine er bundet til sikkerhetsbrikken (TPM) i denne datamaskinen: en kopi av filene dine åpner ingenting på en annen datamaskin.")
    }
    /// The chip is to be used, but the PIN's wrap is older: it is bound at the next PIN.
    public static let chipFromNextPIN = LocalizedText(
        en: "This computer's security chip (TPM) will guard your PIN from the next time you type it.",
        nb: "Sikkerhetsbrikken (TPM) i denne datamaskinen vokter PIN-koden din fra neste gang du skriver den.")
    public static let chipLockoutNotArmed = LocalizedText(
        en: "The chip's limit on wrong PINs is not locked by the computer's owner (no lockout password is set), so a program running as you could reset it. Ask whoever looks after this computer to set one.",
        nb: "Brikkens grense for feil PIN-koder er ikke låst av eieren av datamaskinen (ingen låsepassord er satt), så et program som kjører som deg, kan nullstille den. Be den som har ansvar for datamaskinen om å sette et.")
    public static let chipNotUsedNoAccess = LocalizedText(
        en: "This computer's security chip (TPM) is not used: SessionVault may not reach it. To use it, ask whoever looks after this computer to add you to the group “tss”, then log out and in again.",
        nb: "Sikkerhetsbrikken (TPM) i denne datamaskinen brukes ikke: SessionVault får ikke tilgang til den. For å bruke den, be den som har ansvar for datamaskinen om å legge deg til i gruppen «tss», og logg så ut og inn igjen.")
    public static let chipNotUsedNone = LocalizedText(
        en: "No security chip (TPM) was found on this computer, so your sessions are protected as on any computer without one.",
        nb: "Fant ingen sikkerhetsbrikke (TPM) i denne datamaskinen, så øktene dine er beskyttet som på en datamaskin uten.")
    public static let chipTurnedOff = LocalizedText(
        en: "The security chip (TPM) is turned off in SessionVault's configuration (tpm = \"off\").",
        nb: "Sikkerhetsbrikken (TPM) er slått av i SessionVaults oppsett (tpm = \"off\").")
    /// vaultd does not start: the configuration requires a chip that does not answer.
    public static let chipRequiredMissing = LocalizedText(
        en: "The configuration asks for this computer's security chip (tpm = \"required\"), but it cannot be reached. Ask whoever looks after this computer to add you to the group “tss” (then log out and in), or set tpm = \"auto\"; then start vaultd again.",
        nb: "Oppsettet krever sikkerhetsbrikken i denne datamaskinen (tpm = \"required\"), men den kan ikke nås. Be den som har ansvar for datamaskinen om å legge deg til i gruppen «tss» (og logg så ut og inn), eller sett tpm = \"auto\"; start så vaultd igjen.")

    // MARK: Factor labels in `status` (short: no full stop)

    /// A reason's first sentence, as a short label ("Fingerprint reader not found").
    public static func shortLabel(_ reason: LocalizedText) -> LocalizedText {
        func first(_ s: String) -> String {
            var sentence = Substring(s)
            var i = s.startIndex
            while i < s.endIndex {
                let next = s.index(after: i)
                if s[i] == ".", next < s.endIndex, s[next] == " " {
                    sentence = s[..<i]
                    break
                }
                i = next
            }
            return String(sentence.hasSuffix(".") ? sentence.dropLast() : sentence)
        }
        return LocalizedText(en: first(reason.en), nb: first(reason.nb))
    }

    public static func factorLabelNotSetUp(_ name: LocalizedText) -> LocalizedText {
        LocalizedText(en: "\(name.en) not set up", nb: "\(name.nb) er ikke satt opp")
    }

    /// Its enrollment changed (for a fingerprint: the fingers enrolled on the reader).
    /// `why`: the factor's own words for what changed (the fingerprint's "fingerprints changed").
    public static func factorLabelSetUpAgain(_ name: LocalizedText, why: LocalizedText?) -> LocalizedText {
        let why = why ?? LocalizedText(en: "its enrollment changed", nb: "oppsettet er endret")
        return LocalizedText(en: "\(name.en) must be set up again (\(why.en))", nb: "\(name.nb) må settes opp på nytt (\(why.nb))")
    }

    public static func factorLabelLockedOut(_ name: LocalizedText, seconds: Int) -> LocalizedText {
        LocalizedText(en: "\(name.en) locked — try again in \(duration(seconds, .en))",
                      nb: "\(name.nb) er sperret — prøv igjen om \(duration(seconds, .nb))")
    }

    /// A fingerprint whose soft unlock is gone: the PIN (or a login) once first.
    public static func factorLabelEnabledAfterOnce(_ name: LocalizedText, hasPIN: Bool) -> LocalizedText {
        hasPIN
            ? LocalizedText(en: "\(name.en) enabled — enter your PIN once to use it",
                            nb: "\(name.nb) er slått på — skriv inn PIN-koden én gang for å bruke den")
            : LocalizedText(en: "\(name.en) enabled — log in once to use it",
                            nb: "\(name.nb) er slått på — logg inn én gang for å bruke den")
    }

    /// `detail`: the factor's own words after "enabled" (a fingerprint reader's name and limits).
    public static func factorLabelEnabled(_ name: LocalizedText, detail: LocalizedText? = nil) -> LocalizedText {
        let more = detail.map { (en: " (\($0.en))", nb: " (\($0.nb))") } ?? (en: "", nb: "")
        return LocalizedText(en: "\(name.en) enabled\(more.en)", nb: "\(name.nb) er slått på\(more.nb)")
    }

    /// A fingerprint asked for by name while its soft unlock is gone.
    public static func softUnlockGone(_ name: LocalizedText, hasPIN: Bool) -> LocalizedText {
        hasPIN
            ? LocalizedText(en: "Enter your PIN once; after that \(name.en) opens the vault again.",
                            nb: "Skriv inn PIN-koden én gang; etter det åpner \(name.nb) hvelvet igjen.")
            : LocalizedText(en: "Log in with BankID or Vipps once; after that \(name.en) opens the vault again.",
                            nb: "Logg inn med BankID eller Vipps én gang; etter det åpner \(name.nb) hvelvet igjen.")
    }

    public static func tooManyConnections(limit: Int) -> LocalizedText {
        LocalizedText(
            en: "vaultd already has \(limit) connections open, its limit. Close programs you are not using, or try again in a moment.",
            nb: "vaultd har allerede \(limit) forbindelser åpne, som er grensen. Lukk programmer du ikke bruker, eller prøv igjen om litt.")
    }

    /// One sandboxed app holds as many connections as one app may (ConnectionLimits.maxPerConfinedApp).
    public static func tooManyConnectionsForApp(_ app: String?, limit: Int) -> LocalizedText {
        let (en, nb) = quotedApp(app)
        return LocalizedText(
            en: "SessionVault already has \(limit) connections open for \(en), as many as one app may have. Close the app and open it again.",
            nb: "SessionVault har allerede \(limit) forbindelser åpne for \(nb), så mange som én app kan ha. Lukk appen og åpne den igjen.")
    }

    public static func tooManyRequestsInFlight(limit: Int) -> LocalizedText {
        LocalizedText(
            en: "This connection already has \(limit) requests waiting for answers, its limit. Wait for some answers before sending more.",
            nb: "Denne forbindelsen har allerede \(limit) forespørsler som venter på svar, som er grensen. Vent på noen svar før du sender flere.")
    }

    public static func noMatch(attemptsLeft: Int) -> LocalizedText {
        if attemptsLeft <= 0 {
            return LocalizedText(
                en: "That did not match. The next wrong attempt adds a waiting time.",
                nb: "Det stemte ikke. Neste feil forsøk gir ventetid.")
        }
        return LocalizedText(
            en: "That did not match. \(attemptsLeft) \(attemptsLeft == 1 ? "try" : "tries") left before a pause. Please try again.",
            nb: "Det stemte ikke. \(attemptsLeft) forsøk igjen før en pause. Prøv igjen.")
    }

    /// "30 s", "2 min", "1 h 5 min" / "30 sek", "2 min", "1 t 5 min".
    public static func duration(_ seconds: Int, _ language: Language) -> String {
        let h = seconds / 3600, m = (seconds % 3600) / 60, s = seconds % 60
        let hUnit = language == .nb ? "t" : "h"
        let sUnit = language == .nb ? "sek" : "s"
        if h > 0 { return m > 0 ? "\(h) \(hUnit) \(m) min" : "\(h) \(hUnit)" }
        if m > 0 { return s > 0 && m < 5 ? "\(m) min \(s) \(sUnit)" : "\(m) min" }
        return "\(s) \(sUnit)"
    }

    // Identity providers (BankID, Vipps, ID-porten, any OpenID Connect issuer).
    // `provider` and `alternatives` are display names ("BankID", "Vipps").

    /// "BankID login was cancelled" (word for word, for BankID and Vipps).
    public static func loginCancelled(provider: String) -> LocalizedText {
        LocalizedText(en: "\(provider) login was cancelled", nb: "\(provider)-innloggingen ble avbrutt")
    }

    /// "BankID is temporarily unavailable. Try Vipps instead or retry later" (word for word).
    public static func providerUnavailable(provider: String, alternatives: [String]) -> LocalizedText {
        if alternatives.isEmpty {
            return LocalizedText(en: "\(provider) is temporarily unavailable. Please retry later",
                                 nb: "\(provider) er midlertidig utilgjengelig. Prøv igjen senere")
        }
        return LocalizedText(
            en: "\(provider) is temporarily unavailable. Try \(alternatives.joined(separator: " or ")) instead or retry later",
            nb: "\(provider) er midlertidig utilgjengelig. Prøv \(alternatives.joined(separator: " eller ")) i stedet, eller prøv igjen senere")
    }

    /// Which login: the question before one button per provider ("BankID / Vipps");
    /// `toContinue` when the login is what stands between the app and its session.
    public static func chooseLogin(_ providers: [String], toContinue: Bool) -> LocalizedText {
        let names = providers.map { shown($0) }.joined(separator: " / ")
        return toContinue
            ? LocalizedText(en: "Log in with \(names) to continue.", nb: "Logg inn med \(names) for å fortsette.")
            : LocalizedText(en: "Log in with \(names).", nb: "Logg inn med \(names).")
    }

    /// Which organization, for a member of several who has not chosen yet
    /// (asked once after a login; the settings app changes it later).
    public static let chooseOrganization = LocalizedText(
        en: "You are a member of more than one organization. Which one do you want to use? You can change this later in SessionVault's settings.",
        nb: "Du er medlem av mer enn én organisasjon. Hvilken vil du bruke? Du kan endre dette senere i innstillingene for SessionVault.")

    /// The button for one provider in that choice.
    public static func useProvider(_ provider: String) -> LocalizedText {
        let provider = shown(provider)
        return LocalizedText(en: "Use \(provider)", nb: "Bruk \(provider)")
    }

    /// A `login` without a provider from a client that cannot be asked which.
    public static let loginNeedsProvider = LocalizedText(
        en: "Say which provider to log in with, for example “bankid” or “vipps”.",
        nb: "Si hvilken tjeneste du vil logge inn med, for eksempel «bankid» eller «vipps».")

    /// A `login` without a provider where none is set up.
    public static let noLoginProvider = LocalizedText(
        en: "No login provider is set up here. Ask whoever set up this computer to add BankID or Vipps ([providers] in config.toml), then try again.",
        nb: "Ingen innloggingstjeneste er satt opp her. Be den som satte opp maskinen om å legge til BankID eller Vipps ([providers] i config.toml), og prøv igjen.")

    /// The prompt that goes with the authorization URL.
    public static func openBrowserToLogIn(provider: String) -> LocalizedText {
        LocalizedText(en: "Log in with \(provider) in your browser.", nb: "Logg inn med \(provider) i nettleseren.")
    }

    /// vaultd's dialog while the browser's login runs; its one button is Cancel.
    public static func waitingForBrowserLogin(provider: String) -> LocalizedText {
        LocalizedText(en: "Log in with \(provider) in your browser. This window closes by itself when you are done. "
                          + "If you closed the browser, press Cancel to start again.",
                      nb: "Logg inn med \(provider) i nettleseren. Dette vinduet lukkes av seg selv når du er ferdig. "
                          + "Har du lukket nettleseren, trykk Avbryt for å begynne på nytt.")
    }

    /// The login was verified but weaker than this step requires (a configured minimum `acr`).
    public static func loginTooWeak(provider: String) -> LocalizedText {
        LocalizedText(
            en: "This step needs a stronger \(provider) login than the one used. Please log in again with \(provider)",
            nb: "Dette steget krever en sterkere \(provider)-innlogging enn den som ble brukt. Logg inn på nytt med \(provider)")
    }

    /// A client that cannot show prompts asked for a browser login.
    public static func loginNeedsBrowser(provider: String) -> LocalizedText {
        LocalizedText(en: "Logging in with \(provider) needs a browser. Start the login from your app",
                      nb: "Innlogging med \(provider) krever en nettleser. Start innloggingen fra appen din")
    }

    /// A login with a fixed redirect port while another login still waits for its browser.
    public static let loginAlreadyWaiting = LocalizedText(
        en: "Another login is already waiting in your browser. Finish or close it, then try again",
        nb: "En annen innlogging venter allerede i nettleseren. Fullfør eller lukk den, og prøv igjen")

    /// A login with a fixed redirect port that another user's program listens on:
    /// the person cannot free it, so "finish the other login" would mislead.
    public static func redirectPortHeldByAnotherUser(provider: String) -> LocalizedText {
        LocalizedText(en: "Another user of this computer is using the address the \(provider) login comes back to, so you cannot log in with \(provider) now. Ask whoever looks after this computer for help",
                      nb: "En annen bruker på denne datamaskinen bruker adressen som \(provider)-innloggingen kommer tilbake til, så du kan ikke logge inn med \(provider) nå. Be den som har ansvar for datamaskinen, om hjelp")
    }

    // The organization's backend (docs/backend.md, section 5): its refusals by
    // its own rules, named by a fixed `error_description`, never by wire text.

    /// `access_denied` / `age`: the person is under the organization's age limit.
    public static let backendRefusedAge = LocalizedText(
        en: "Your organization's service is only for people aged 18 or over, so the login was refused. If this is wrong, contact your organization",
        nb: "Tjenesten til organisasjonen din er bare for personer som er 18 år eller eldre, så innloggingen ble avvist. Hvis dette er feil, kontakt organisasjonen din")

    /// `access_denied` / `not_member`: no member record for the person.
    public static let backendRefusedNotMember = LocalizedText(
        en: "Your organization has no membership for you, so the login was refused. Contact your organization to become a member",
        nb: "Organisasjonen din har ikke noe medlemskap registrert på deg, så innloggingen ble avvist. Kontakt organisasjonen din for å bli medlem")

    /// `access_denied` / `membership_ended`, at login or at a refresh (the session ends).
    public static let backendMembershipEnded = LocalizedText(
        en: "Your membership has ended, so your organization's service is closed to you. Contact your organization if this is wrong",
        nb: "Medlemskapet ditt er avsluttet, så tjenesten til organisasjonen din er stengt for deg. Kontakt organisasjonen din hvis dette er feil")

    /// `access_denied` / `national_id`: the login gave the backend no valid national ID
    /// (its age and member rules need one); logging in again the same way would not help.
    public static func backendRefusedNationalID(provider: String) -> LocalizedText {
        LocalizedText(
            en: "Your organization's service could not read your national identity number from the \(provider) login, so the login was refused. Try another way to log in, or contact your organization",
            nb: "Tjenesten til organisasjonen din kunne ikke lese fødselsnummeret ditt fra \(provider)-innloggingen, så innloggingen ble avvist. Prøv en annen måte å logge inn på, eller kontakt organisasjonen din")
    }

    /// `invalid_grant` / `reused` at a refresh: the backend saw this session's
    /// refresh token used twice, so a copy exists elsewhere and it ended the session.
    public static let sessionEndedReused = LocalizedText(
        en: "Your session was ended for your safety, because it was also used from somewhere else. Please log in again",
        nb: "Økten din ble avsluttet av sikkerhetshensyn, fordi den også ble brukt fra et annet sted. Logg inn på nytt")

    /// The status line of a provider whose session cannot outlive its access
    /// token (Vipps without the organization's backend).
    public static func sessionLastsOnlyAccessToken(provider: String) -> LocalizedText {
        LocalizedText(
            en: "A \(provider) session lasts only as long as \(provider)'s access token (minutes), so you will often log in with \(provider) again. Your organization can set up its service to keep your session; ask them about it.",
            nb: "En \(provider)-økt varer bare så lenge tilgangsnøkkelen fra \(provider) varer (minutter), så du må ofte logge inn med \(provider) igjen. Organisasjonen din kan sette opp tjenesten sin slik at den tar vare på økten din; spør dem om det.")
    }

    /// The status line of a provider whose sessions the organization's backend keeps.
    public static func sessionKeptByBackend(origin: String) -> LocalizedText {
        LocalizedText(en: "Sessions are kept by your organization's service at \(origin)",
                      nb: "Øktene tas vare på av tjenesten til organisasjonen din på \(origin)")
    }

    // Renewing a session (refresh). Only the provider's `invalid_grant` ends a
    // session ("Your session has expired"); every other failure keeps it, and
    // these sentences say what went wrong. `error` is the provider's OAuth
    // error code, one of RFC 6749's names only (never free text from the wire).

    /// `invalid_client` / `unauthorized_client`: the app's registration, not the person's session, was refused.
    public static func refreshClientRefused(provider: String, error: String) -> LocalizedText {
        LocalizedText(
            en: "The app's registration at \(provider) was refused (\(error)). Your session is kept; contact your organization's support.",
            nb: "Appens registrering hos \(provider) ble avvist (\(error)). Økten din er beholdt; kontakt brukerstøtten i organisasjonen din.")
    }

    /// Another OAuth error (`invalid_request`, `unsupported_grant_type`, `invalid_scope`, or one not in RFC 6749).
    public static func refreshRefused(provider: String, error: String?) -> LocalizedText {
        let named = error.map { " (\($0))" } ?? ""
        return LocalizedText(
            en: "\(provider) refused to renew your session\(named). Your session is kept; contact your organization's support.",
            nb: "\(provider) nektet å fornye økten din\(named). Økten din er beholdt; kontakt brukerstøtten i organisasjonen din.")
    }

    /// 5xx, `server_error`, `temporarily_unavailable`, refused or reset connections.
    public static func refreshUnavailable(provider: String) -> LocalizedText {
        LocalizedText(
            en: "\(provider) is temporarily unavailable, so your session could not be renewed. Your session is kept; try again in a few minutes.",
            nb: "\(provider) er midlertidig utilgjengelig, så økten din kunne ikke fornyes. Økten din er beholdt; prøv igjen om noen minutter.")
    }

    /// The token endpoint did not answer within the request timeout.
    public static func refreshTimedOut(provider: String) -> LocalizedText {
        LocalizedText(
            en: "\(provider) did not answer in time, so your session could not be renewed. Your session is kept; try again in a moment.",
            nb: "\(provider) svarte ikke i tide, så økten din kunne ikke fornyes. Økten din er beholdt; prøv igjen om litt.")
    }

    /// A 200 answer that is not a token response (bad JSON, no access token, wrong token type).
    public static func refreshUnreadable(provider: String) -> LocalizedText {
        LocalizedText(
            en: "\(provider) sent an answer that could not be read, so your session could not be renewed. Your session is kept; try again later, and contact your organization's support if it keeps happening.",
            nb: "\(provider) sendte et svar som ikke kunne leses, så økten din kunne ikke fornyes. Økten din er beholdt; prøv igjen senere, og kontakt brukerstøtten i organisasjonen din hvis det fortsetter.")
    }

    /// The refresh was cut off on our side (vaultd stopping).
    public static func refreshInterrupted(provider: String) -> LocalizedText {
        LocalizedText(
            en: "Renewing your \(provider) session was interrupted. Your session is kept; try again.",
            nb: "Fornyingen av \(provider)-økten din ble avbrutt. Økten din er beholdt; prøv igjen.")
    }

    /// The page the browser shows after the redirect.
    public static func browserLoggedIn(provider: String) -> LocalizedText {
        LocalizedText(en: "You are logged in with \(provider). You can close this window and go back to the app.",
                      nb: "Du er logget inn med \(provider). Du kan lukke dette vinduet og gå tilbake til appen.")
    }
    public static let browserCloseWindow = LocalizedText(
        en: "You can close this window and go back to the app.",
        nb: "Du kan lukke dette vinduet og gå tilbake til appen.")
    /// A request on the loopback redirect path that lacks the login's state.
    public static let browserNotThisLogin = LocalizedText(
        en: "This is not the login SessionVault is waiting for. Finish logging in in the window SessionVault opened, or start again from your app.",
        nb: "Dette er ikke innloggingen SessionVault venter på. Fullfør innloggingen i vinduet SessionVault åpnet, eller start på nytt fra appen din.")
    /// The launch page's short moment before the browser goes on to the provider.
    public static let browserGoingToLogin = LocalizedText(
        en: "Going on to the login page…",
        nb: "Går videre til innloggingssiden …")
    /// The one-time login page was asked for twice: the login ends (both in the
    /// error and on the second browser's page), whoever came first.
    public static let loginPageOpenedTwice = LocalizedText(
        en: "The login page was opened twice, so this login was stopped to keep your account safe: something else on this computer may have opened it. Log in again from your app; if this happens again, ask whoever looks after this computer for help",
        nb: "Innloggingssiden ble åpnet to ganger, så denne innloggingen ble stoppet for å holde kontoen din trygg: noe annet på denne datamaskinen kan ha åpnet den. Logg inn på nytt fra appen din. Skjer det igjen, be den som har ansvar for datamaskinen, om hjelp")
    public static let browserAlreadyHandled = LocalizedText(
        en: "This login has already been handled. You can close this window.",
        nb: "Denne innloggingen er allerede behandlet. Du kan lukke dette vinduet.")

    // Outside the protocol: what vaultd and vaultctl say about their surroundings.

    public static let daemonNotRunning = LocalizedText(
        en: "SessionVault is not running. Start it with “systemctl --user start vaultd” (or run “vaultd”), then try again.",
        nb: "SessionVault kjører ikke. Start den med «systemctl --user start vaultd» (eller kjør «vaultd»), og prøv igjen.")
    /// What answers at the socket runs as another user: a client refuses it.
    public static func foreignServer(_ path: String) -> LocalizedText {
        LocalizedText(
            en: "The program at \(path) is not your vaultd (it runs as another user), so nothing was sent to it. Remove that socket (ask an administrator if it is not yours) and start vaultd again.",
            nb: "Programmet på \(path) er ikke din vaultd (det kjører som en annen bruker), så ingenting ble sendt til det. Fjern den socketen (spør en administrator hvis den ikke er din) og start vaultd igjen.")
    }
    public static let daemonClosed = LocalizedText(
        en: "SessionVault closed the connection unexpectedly. Try again; if it keeps happening, restart vaultd.",
        nb: "SessionVault lukket forbindelsen uventet. Prøv igjen; hvis det fortsetter, start vaultd på nytt.")
    public static let keyringLocked = LocalizedText(
        en: "Your desktop keyring is locked — unlock it and start vaultd again.",
        nb: "Nøkkelringen på skrivebordet er låst — lås den opp og start vaultd igjen.")
    public static let keyringMissing = LocalizedText(
        en: "No desktop keyring (Secret Service) was found. Log in to a desktop session with a keyring, or start vaultd with --keyring=file to keep the device key in a file (weaker).",
        nb: "Fant ingen nøkkelring (Secret Service) på skrivebordet. Logg inn i en skrivebordsøkt med nøkkelring, eller start vaultd med --keyring=file for å lagre enhetsnøkkelen i en fil (svakere).")
    public static let keyringFailed = LocalizedText(
        en: "The desktop keyring did not answer as expected. Check that it is running and unlocked, then start vaultd again.",
        nb: "Nøkkelringen svarte ikke som forventet. Sjekk at den kjører og er låst opp, og start vaultd igjen.")
    public static let storeTooNew = LocalizedText(
        en: "The vault file was written by a newer SessionVault. Install the newer version (your data is untouched).",
        nb: "Hvelvfilen ble skrevet av en nyere SessionVault. Installer den nyere versjonen (dataene dine er urørt).")
    public static let storeUnreadable = LocalizedText(
        en: "The vault file could not be opened. Check the disk and the file's permissions, then start vaultd again.",
        nb: "Hvelvfilen kunne ikke åpnes. Sjekk disken og filrettighetene, og start vaultd igjen.")
    public static let deviceKeyMismatch = LocalizedText(
        en: "The device key in your keyring does not match this vault. If the keyring was reset, the saved sessions cannot be opened: move the vault file away and log in with BankID or Vipps again.",
        nb: "Enhetsnøkkelen i nøkkelringen passer ikke til dette hvelvet. Hvis nøkkelringen er nullstilt, kan de lagrede øktene ikke åpnes: flytt hvelvfilen bort og logg inn med BankID eller Vipps på nytt.")
    public static let socketInUse = LocalizedText(
        en: "Another vaultd is already running for this user. Use it, or stop it first.",
        nb: "En annen vaultd kjører allerede for denne brukeren. Bruk den, eller stopp den først.")
    public static let socketPathUnsafe = LocalizedText(
        en: "The socket path is not safe (a link, or owned by another user). Remove it and start vaultd again.",
        nb: "Stien til socketen er ikke trygg (en lenke, eller eid av en annen bruker). Fjern den og start vaultd igjen.")
    public static let stubReaderNotAllowed = LocalizedText(
        en: "The configuration asks for the stub fingerprint reader, a simulation that any program running as you can make report a match. Remove reader = \"stub\" from [fingerprint] (the default is \"none\"), or, for a test or demo only, add allow_stub_reader = true; then start vaultd again.",
        nb: "Konfigurasjonen ber om den simulerte fingeravtrykkleseren (stub), som ethvert program som kjører som deg, kan få til å melde treff. Fjern reader = \"stub\" fra [fingerprint] (standard er \"none\"), eller, bare for test eller demo, legg til allow_stub_reader = true; start så vaultd igjen.")
    /// The socket's directory is a link, another user's, or open to others.
    public static func socketDirectoryUnsafe(_ dir: String) -> LocalizedText {
        LocalizedText(
            en: "The socket directory \(dir) is not safe: it must be your own directory that only you can open (mode 700), not a link. Remove it (if it is not yours, ask its owner or an administrator to), or set XDG_RUNTIME_DIR, and start vaultd again.",
            nb: "Socketmappen \(dir) er ikke trygg: den må være din egen mappe som bare du kan åpne (modus 700), ikke en lenke. Fjern den (er den ikke din, be eieren eller en administrator om å gjøre det), eller sett XDG_RUNTIME_DIR, og start vaultd igjen.")
    }
    public static let configInvalid = LocalizedText(
        en: "The configuration file has an error. Fix the line named below and start vaultd again.",
        nb: "Konfigurasjonsfilen har en feil. Rett linjen som er nevnt nedenfor, og start vaultd igjen.")
}

// MARK: - The fingerprint reader through fprintd (Plugins/FingerprintFactor)

/// What the fingerprint factor says when fprintd (the desktop's fingerprint
/// service) refuses, stops, or asks for another scan. Each says what to do next.
public enum FingerprintMessages {
    /// The fingerprint dialog while a scan runs (vaultd's own dialog closes when the scan ends).
    public static let touchToUnlock = LocalizedText(
        en: "Touch the fingerprint reader to unlock.",
        nb: "Berør fingeravtrykkleseren for å låse opp.")
    public static let touchToEnroll = LocalizedText(
        en: "Touch the fingerprint reader to turn on fingerprint login.",
        nb: "Berør fingeravtrykkleseren for å slå på fingeravtrykkpålogging.")
    /// `AlreadyInUse`: another program (a login screen, `fprintd-verify`, GNOME Settings) holds the reader.
    public static let readerInUse = LocalizedText(
        en: "Another program is using the fingerprint reader. Close it or finish its fingerprint prompt, then try again — or use your PIN or log in with BankID or Vipps.",
        nb: "Et annet program bruker fingeravtrykkleseren. Lukk det eller fullfør fingeravtrykkspørsmålet der, og prøv igjen — eller bruk PIN-koden eller logg inn med BankID eller Vipps.")
    /// `NoSuchDevice`: fprintd runs but sees no reader.
    public static let noDevice = LocalizedText(
        en: "The fingerprint service found no fingerprint reader. Plug the reader in, or use your PIN or log in with BankID or Vipps.",
        nb: "Fingeravtrykktjenesten fant ingen fingeravtrykkleser. Koble leseren til, eller bruk PIN-koden eller logg inn med BankID eller Vipps.")
    /// `PermissionDenied`: polkit refused fingerprint verification to this user.
    public static let permissionDenied = LocalizedText(
        en: "This computer's security policy does not let SessionVault use the fingerprint reader. Ask whoever manages the computer to allow fingerprint verification (polkit action net.reactivated.fprint.device.verify), or use your PIN or log in with BankID or Vipps.",
        nb: "Sikkerhetsreglene på denne datamaskinen lar ikke SessionVault bruke fingeravtrykkleseren. Be den som drifter datamaskinen om å tillate fingeravtrykkbekreftelse (polkit-handlingen net.reactivated.fprint.device.verify), eller bruk PIN-koden eller logg inn med BankID eller Vipps.")
    /// `NoEnrolledPrints`: no finger is enrolled for this user.
    public static let noEnrolledPrints = LocalizedText(
        en: "Add a fingerprint in Settings → Users first, then turn on fingerprint login. Until then, use your PIN or log in with BankID or Vipps.",
        nb: "Legg først til et fingeravtrykk i Innstillinger → Brukere, og slå så på fingeravtrykkpålogging. Til da kan du bruke PIN-koden eller logge inn med BankID eller Vipps.")
    /// fprintd stopped (or restarted) while a scan was waiting.
    public static let serviceStopped = LocalizedText(
        en: "The fingerprint service stopped during the scan. Use your PIN or log in with BankID or Vipps, and try the fingerprint again later.",
        nb: "Fingeravtrykktjenesten stoppet under skanningen. Bruk PIN-koden eller logg inn med BankID eller Vipps, og prøv fingeravtrykket igjen senere.")
    /// `reader = "fprintd"` but the service does not answer on the system bus.
    public static let serviceNotAnswering = LocalizedText(
        en: "The fingerprint service (fprintd) is not answering. Install the fprintd package and check that the system bus runs, or use your PIN or log in with BankID or Vipps.",
        nb: "Fingeravtrykktjenesten (fprintd) svarer ikke. Installer pakken fprintd og sjekk at systembussen kjører, eller bruk PIN-koden eller logg inn med BankID eller Vipps.")
    /// `verify-swipe-too-short`.
    public static let swipeTooShort = LocalizedText(
        en: "The swipe was too short — swipe your finger across the reader again, a little slower.",
        nb: "Sveipet var for kort — sveip fingeren over leseren igjen, litt langsommere.")
    /// `verify-finger-not-centered`.
    public static let fingerNotCentered = LocalizedText(
        en: "Your finger was not in the middle of the reader — place it in the centre and try again.",
        nb: "Fingeren lå ikke midt på leseren — legg den midt på og prøv igjen.")
    /// `verify-remove-and-retry`.
    public static let removeAndRetry = LocalizedText(
        en: "Lift your finger off the reader, then touch it again.",
        nb: "Løft fingeren fra leseren, og berør den igjen.")
    /// A clause for status lines after the reader's name ("Fingerprint enabled
    /// (Synaptics … — fprintd does not notice …)"): what fprintd cannot see.
    public static let sameFingerCaveat = LocalizedText(
        en: "fprintd does not notice a finger deleted and enrolled again under the same name; your PIN or a login is asked for again after the fingerprint time limit",
        nb: "fprintd merker ikke at en finger slettes og legges til på nytt med samme navn; PIN-koden eller en innlogging blir spurt om igjen etter tidsgrensen for fingeravtrykk")
}

// MARK: - vaultd's own dialogs (pinentry), for clients that said "prompter": "vault"

extension Messages {
    public static let dialogTitle = LocalizedText(en: "SessionVault", nb: "SessionVault")
    /// The first line of every dialog: who is asking. `app` is a Flatpak app id or an executable's name.
    public static func appAsks(_ app: String) -> LocalizedText {
        let app = shown(app)
        return LocalizedText(en: "‘\(app)’ wants to use your login.", nb: "«\(app)» vil bruke innloggingen din.")
    }
    public static let unknownAppAsks = LocalizedText(
        en: "An app wants to use your login.", nb: "Et program vil bruke innloggingen din.")
    public static let dialogPINLabel = LocalizedText(en: "PIN:", nb: "PIN-kode:")
    public static let dialogOK = LocalizedText(en: "OK", nb: "OK")
    public static let dialogCancel = LocalizedText(en: "Cancel", nb: "Avbryt")
    public static let dialogClose = LocalizedText(en: "Close", nb: "Lukk")
    public static let dialogYes = LocalizedText(en: "Yes", nb: "Ja")
    public static let dialogNo = LocalizedText(en: "No", nb: "Nei")
    public static let dialogTurnOn = LocalizedText(en: "Turn on", nb: "Slå på")
    public static let dialogNotNow = LocalizedText(en: "Not now", nb: "Ikke nå")
    public static let dialogOtherChoices = LocalizedText(en: "Other choices …", nb: "Andre valg …")
    /// The button in the fingerprint dialog that goes to another factor (“Use PIN instead”).
    public static func dialogUseInstead(_ name: LocalizedText) -> LocalizedText {
        LocalizedText(en: "Use \(name.en) instead", nb: "Bruk \(name.nb) i stedet")
    }
    /// The button that goes to a login (“Use BankID or Vipps”).
    public static func dialogUseLogin(_ names: [String]) -> LocalizedText {
        let names = names.map { shown($0) }
        func join(_ or: String) -> String {
            names.count <= 1 ? names.joined() : names.dropLast().joined(separator: ", ") + " \(or) " + (names.last ?? "")
        }
        return LocalizedText(en: "Use \(join("or"))", nb: "Bruk \(join("eller"))")
    }
    public static let pinentryMissing = LocalizedText(
        en: "The vault cannot show its PIN dialog: no pinentry program was found. Install the package pinentry-gtk2 (or set “pinentry” in config.toml), then try again.",
        nb: "Hvelvet kan ikke vise PIN-dialogen sin: fant ikke noe pinentry-program. Installer pakken pinentry-gtk2 (eller sett «pinentry» i config.toml), og prøv igjen.")
    public static let pinentryFailed = LocalizedText(
        en: "The vault's PIN dialog (pinentry) stopped or did not answer. Try again; if it happens again, install pinentry-gtk2 or set another “pinentry” in config.toml.",
        nb: "PIN-dialogen til hvelvet (pinentry) stoppet eller svarte ikke. Prøv igjen; skjer det igjen, installer pinentry-gtk2 eller sett et annet «pinentry» i config.toml.")

    // MARK: Apps and their grants (docs/threat-model.md, "Apps and their grants")

    /// `app_not_allowed`: the asking app has no grant for the account and no dialog could ask.
    public static func appNotAllowed(_ app: String?) -> LocalizedText {
        let en = app.map { "‘\(shown($0))’ is" } ?? "This app is"
        let nb = app.map { "«\(shown($0))» har" } ?? "Dette programmet har"
        return LocalizedText(
            en: "\(en) not allowed to use that login. Let the app ask through SessionVault's own dialog and choose Allow, or log in from the app itself.",
            nb: "\(nb) ikke lov til å bruke den innloggingen. La appen spørre gjennom SessionVaults egen dialog og velg Tillat, eller logg inn fra appen selv.")
    }
    /// The app asked again within two minutes of the person's No (GrantCheck.askAgainAfter): not asked again yet.
    public static func appDeniedRecently(_ app: String) -> LocalizedText {
        LocalizedText(
            en: "You said no to ‘\(shown(app))’ using this login a moment ago, so you were not asked again. If you want to allow it, open the app again in two minutes and choose Allow.",
            nb: "Du sa nei til at «\(shown(app))» kan bruke denne innloggingen for et øyeblikk siden, så du ble ikke spurt igjen. Vil du tillate det, åpne appen igjen om to minutter og velg Tillat.")
    }
    /// A sandboxed app raised the unlock dialog again right after the person
    /// closed it twice (ClosedDialogs): not shown again yet.
    public static func unlockClosedRecently(_ app: String?) -> LocalizedText {
        let (en, nb) = quotedApp(app)
        return LocalizedText(
            en: "You closed the unlock window for \(en) twice, so it was not opened again. To unlock now, choose Unlock in SessionVault's settings (in your apps menu), or open the app again in two minutes.",
            nb: "Du lukket opplåsingsvinduet for \(nb) to ganger, så det ble ikke åpnet igjen. Vil du låse opp nå, velg Lås opp i SessionVaults innstillinger (i appmenyen), eller åpne appen igjen om to minutter.")
    }
    /// A sandboxed app asked to lock the vault again within ten minutes of
    /// its last lock: the vault stays open (Vault.lock(askedBy:)).
    public static func lockedRecently(_ app: String?) -> LocalizedText {
        let (en, nb) = quotedApp(app)
        return LocalizedText(
            en: "SessionVault was locked by \(en) less than ten minutes ago, so it was not locked again now. To lock it yourself, choose Lock in SessionVault's settings (in your apps menu).",
            nb: "SessionVault ble låst av \(nb) for mindre enn ti minutter siden, så den ble ikke låst igjen nå. Vil du låse den selv, velg Lås i SessionVaults innstillinger (i appmenyen).")
    }
    /// The same for the login: a sandboxed app asked for a login again right
    /// after the person closed its login window twice.
    public static func loginClosedRecently(_ app: String?) -> LocalizedText {
        let (en, nb) = quotedApp(app)
        return LocalizedText(
            en: "You closed the login window for \(en) twice, so it was not opened again. If you want to log in, open the app again in two minutes.",
            nb: "Du lukket innloggingsvinduet for \(nb) to ganger, så det ble ikke åpnet igjen. Vil du logge inn, åpne appen igjen om to minutter.")
    }
    /// An app's name as dialogs show it (`appLabel`), or “this app” when unknown.
    static func quotedApp(_ app: String?) -> (en: String, nb: String) {
        let label = app.map(appLabel) ?? LocalizedText(en: "this app", nb: "denne appen")
        return (label.en, label.nb)
    }
    /// The question of the grant dialog. `app` is already labelled (`appLabel`).
    public static func allowAppQuestion(_ app: LocalizedText, provider: String) -> LocalizedText {
        let provider = shown(provider)
        return LocalizedText(en: "Allow \(app.en) to use your \(provider) session?",
                      nb: "Vil du la \(app.nb) bruke \(provider)-økten din?")
    }
    /// An app's name as dialogs show it.
    public static func appLabel(_ name: String) -> LocalizedText {
        let name = shown(name)
        return LocalizedText(en: "‘\(name)’", nb: "«\(name)»")
    }
    /// Below the grant question for an app known only by the program it runs:
    /// what SessionVault cannot see, and when to say yes, without alarm.
    public static func unverifiedApp(_ program: String) -> LocalizedText {
        let program = shown(program)
        return LocalizedText(
            en: "SessionVault cannot see which app this is, only the program it runs (\(program)). Allow it if you just opened an app that uses your login.",
            nb: "SessionVault kan ikke se hvilken app dette er, bare programmet den kjører (\(program)). Tillat det hvis du nettopp åpnet en app som bruker innloggingen din.")
    }
    /// The grant dialog again, after a Yes that came before it could be read
    /// (a key meant for another window: the dialog had just taken the keyboard).
    public static let answeredBeforeRead = LocalizedText(
        en: "A key was pressed just as this question appeared, before you could read it, so it was not taken as your answer. Read the question, then choose.",
        nb: "En tast ble trykket akkurat da dette spørsmålet kom opp, før du kunne lese det, så den ble ikke tatt som svaret ditt. Les spørsmålet, og velg så.")
    /// The app asking shows the name of another app the person already allowed.
    public static func sameNameAsAllowed(_ name: String, asking: String, allowed: [String]) -> LocalizedText {
        let (name, asking, allowed) = (shown(name), shown(asking), allowed.map { shown($0) }.joined(separator: ", "))
        return LocalizedText(
            en: "Careful: another app called ‘\(name)’ can already use your login. That one is \(allowed); this one is \(asking). Allow this one only if you installed both.",
            nb: "Obs: en annen app som heter «\(name)», kan allerede bruke innloggingen din. Den er \(allowed); denne er \(asking). Tillat denne bare hvis du har installert begge.")
    }
    public static func otherAppsAllowed(_ apps: [String]) -> LocalizedText {
        LocalizedText(en: "Allowed now: \(apps.joined(separator: ", ")).", nb: "Tillatt nå: \(apps.joined(separator: ", ")).")
    }
    public static let dialogAllow = LocalizedText(en: "Allow", nb: "Tillat")
    public static let dialogOnlyThisTime = LocalizedText(en: "Only this time", nb: "Bare denne gangen")
    public static let dialogDeny = LocalizedText(en: "Deny", nb: "Avslå")
    /// `vaultctl apps allow` named an app in a form that says no kind.
    public static func appNeedsKind(_ app: String) -> LocalizedText {
        LocalizedText(en: "Say which app as KIND:NAME (flatpak:org.example.App, snap:NAME, desktop:NAME) or as the full path of its program, not ‘\(app)’.",
                      nb: "Si hvilken app som TYPE:NAVN (flatpak:org.example.App, snap:NAVN, desktop:NAVN) eller som hele stien til programmet, ikke «\(app)».")
    }
    /// A sandboxed app tried to grant an app access (only the person may, from outside the sandbox).
    public static let sandboxCannotGrant = LocalizedText(
        en: "An app in a sandbox cannot give apps access to logins. Allow it in SessionVault's own dialog when the app asks.",
        nb: "En app i en sandkasse kan ikke gi apper tilgang til innlogginger. Tillat det i SessionVaults egen dialog når appen spør.")
    /// A name from outside (an app's program or id, a provider's name from
    /// config.toml) as a dialog may show it: control characters (a newline
    /// that fakes a second paragraph), format characters (bidi overrides that
    /// reverse what is read, zero-width ones) and line separators are dropped,
    /// and it is cut at `limit` characters, so a name can only be a name.
    public static func shown(_ name: String, limit: Int = 64) -> String {
        var kept = String.UnicodeScalarView()
        for scalar in name.unicodeScalars {
            switch scalar.properties.generalCategory {
            case .control, .format, .lineSeparator, .paragraphSeparator, .surrogate, .privateUse, .unassigned: continue
            default: kept.append(scalar)
            }
        }
        let clean = String(String(kept).drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
        return clean.count > limit ? String(clean.prefix(limit - 1)) + "…" : clean
    }

    /// A presence factor gave up after several misses (the fingerprint's three).
    public static let tooManyMisses = LocalizedText(
        en: "That did not match several times. Use your PIN, or log in with BankID or Vipps.",
        nb: "Det stemte ikke flere ganger. Bruk PIN-koden, eller logg inn med BankID eller Vipps.")

    /// A factor's question was not answered in time.
    public static let noAnswerInTime = LocalizedText(
        en: "No answer came in time. Please try again.", nb: "Det kom ikke noe svar i tide. Prøv igjen.")

    /// `unlock NAME`, `enroll NAME`, … with a factor this vaultd does not have.
    public static func unknownFactor(_ id: String, known: String) -> LocalizedText {
        LocalizedText(en: "There is no unlock method called “\(shown(id))”. Choose one of: \(known).",
                      nb: "Det finnes ingen opplåsingsmåte som heter «\(shown(id))». Velg en av: \(known).")
    }

    /// `login NAME` with a provider that is not configured.
    public static func unknownProvider(_ id: String, known: [String]) -> LocalizedText {
        let list = known.joined(separator: ", ")
        return LocalizedText(
            en: "There is no login provider called “\(id)”. Choose one of: \(list.isEmpty ? "(none configured)" : list).",
            nb: "Det finnes ingen innloggingstjeneste som heter «\(id)». Velg en av: \(list.isEmpty ? "(ingen satt opp)" : list).")
    }

    public static func loginNeedsPerson(_ provider: String) -> LocalizedText {
        LocalizedText(
            en: "Logging in needs the person: use an interactive client (for example “vaultctl login \(provider)”).",
            nb: "Innlogging krever personen: bruk en interaktiv klient (for eksempel «vaultctl login \(provider)»).")
    }

    public static func factorSetUp(_ name: LocalizedText) -> LocalizedText {
        LocalizedText(en: "\(name.en) is set up.", nb: "\(name.nb) er satt opp.")
    }

    /// The offer after a login, for a factor with no words of its own.
    public static func turnOnOffer(_ name: LocalizedText) -> LocalizedText {
        LocalizedText(en: "Turn on \(name.en)? Next time you can open your apps with it instead of logging in.",
                      nb: "Slå på \(name.nb)? Neste gang kan du åpne appene dine med den i stedet for å logge inn.")
    }

    public static func turnOffQuestion(_ name: LocalizedText) -> LocalizedText {
        LocalizedText(en: "Turn off \(name.en) unlock? You can set it up again later.",
                      nb: "Slå av opplåsing med \(name.nb)? Du kan sette den opp igjen senere.")
    }

    /// No session under the account an app or a person named. Said the same
    /// whether there is none or the asking app may not see it, so naming an
    /// account tells a sandboxed app nothing it did not know.
    public static func noSessionNamed(_ account: String) -> LocalizedText {
        LocalizedText(en: "There is no session for “\(shown(account))” on this computer. Log in with BankID or Vipps to get one, or choose another account.",
                      nb: "Det finnes ingen økt for «\(shown(account))» på denne datamaskinen. Logg inn med BankID eller Vipps for å få en, eller velg en annen konto.")
    }

    /// A change called off (No, Cancel, a closed dialog): the unlock's
    /// "choose another way to log in" is for an app waiting for a session.
    public static let nothingChanged = LocalizedText(
        en: "Nothing was changed. You can try again whenever you like.",
        nb: "Ingenting ble endret. Du kan prøve igjen når du vil.")

    public static let turnOffNeedsConfirmation = LocalizedText(
        en: "Turning off an unlock method needs a confirmation. Turn it off in SessionVault's settings, which asks you first (vaultctl: --yes; a program sends “confirm”: true).",
        nb: "Å slå av en opplåsingsmåte krever en bekreftelse. Slå den av i SessionVaults innstillinger, som spør deg først (vaultctl: --yes; et program sender «confirm»: true).")

    public static func startOverQuestion(sessions: Int, factors: Int) -> LocalizedText {
        LocalizedText(
            en: "Start over? This deletes \(sessions) saved session\(sessions == 1 ? "" : "s") and \(factors) unlock method\(factors == 1 ? "" : "s") (PIN, fingerprint). You will log in with BankID or Vipps again. This cannot be undone.",
            nb: "Begynne på nytt? Dette sletter \(sessions) lagrede økt\(sessions == 1 ? "" : "er") og \(factors) opplåsingsmåte\(factors == 1 ? "" : "r") (PIN-kode, fingeravtrykk). Du logger inn med BankID eller Vipps igjen. Dette kan ikke angres.")
    }

    public static let startOverNeedsConfirmation = LocalizedText(
        en: "Starting over deletes every saved session and needs a confirmation. Choose Start over in SessionVault's settings, which asks you first (vaultctl: --yes; a program sends “confirm”: true).",
        nb: "Å begynne på nytt sletter alle lagrede økter og krever en bekreftelse. Velg Begynn på nytt i SessionVaults innstillinger, som spør deg først (vaultctl: --yes; et program sender «confirm»: true).")

    /// A login as another person than the vault's owner (the identity record names someone else).
    public static func loginOfAnotherPerson(_ provider: String) -> LocalizedText {
        LocalizedText(
            en: "You logged in with \(provider) as someone other than the person this vault belongs to. Log in with your own \(provider), or use your fingerprint or PIN.",
            nb: "Du logget inn med \(provider) som en annen person enn den hvelvet tilhører. Logg inn med din egen \(provider), eller bruk fingeravtrykk eller PIN-kode.")
    }

    /// A peer whose identity could not be established (it exited before vaultd
    /// read it, or it runs in another pid namespace): it gets nothing.
    public static let unidentifiedApp = LocalizedText(
        en: "SessionVault could not tell which app this is, so it shares no login with it. Close the app and open it again; if this keeps happening, ask whoever helps you with this computer.",
        nb: "SessionVault kunne ikke se hvilken app dette er, og deler derfor ingen innlogging med den. Lukk appen og åpne den igjen; hvis det fortsetter, spør den som hjelper deg med datamaskinen.")
    /// An admin op (`reset`, `disable`, `enroll`, `reenroll`, `sync_conflicts`)
    /// from a sandboxed or unidentified app: only the person may.
    public static let notForApps = LocalizedText(
        en: "An app cannot change how SessionVault is unlocked or delete saved logins. Do it yourself in SessionVault's own settings or dialogs, or ask whoever helps you with this computer.",
        nb: "En app kan ikke endre hvordan SessionVault låses opp, eller slette lagrede innlogginger. Gjør det selv i SessionVaults egne innstillinger eller dialoger, eller spør den som hjelper deg med datamaskinen.")
    /// A sandboxed app tried to import over a login it was not granted.
    public static let importNotYours = LocalizedText(
        en: "This app may not replace a login that belongs to another app. Log in from the app itself, or let the app ask through SessionVault's own dialog.",
        nb: "Denne appen kan ikke erstatte en innlogging som tilhører en annen app. Logg inn fra appen selv, eller la appen spørre gjennom SessionVaults egen dialog.")
    /// A sandboxed app importing one account more than it may keep (ImportCheck.maxAccountsPerSandboxedApp).
    public static func tooManyAccounts(_ app: String, limit: Int) -> LocalizedText {
        LocalizedText(
            en: "‘\(shown(app))’ already keeps \(limit) logins in SessionVault, the most one app may. Log out of one it no longer needs in SessionVault's settings (in your apps menu), then try again.",
            nb: "«\(shown(app))» har allerede \(limit) innlogginger i SessionVault, det meste én app kan ha. Logg ut av en den ikke lenger trenger i innstillingene til SessionVault (i appmenyen), og prøv igjen.")
    }
    /// `import` over another app's session, asked of the person.
    public static func replaceSession(_ name: String, provider: String) -> LocalizedText {
        let name = shown(name), provider = shown(provider)
        return LocalizedText(en: "Replace the saved \(provider) login of \(name) with the imported one? The apps that used it will use the new one.",
                      nb: "Erstatte den lagrede \(provider)-innloggingen til \(name) med den importerte? Appene som brukte den, bruker den nye.")
    }
    /// Changing or turning off the PIN from a client that cannot ask the person.
    public static let currentPINNeedsPerson = LocalizedText(
        en: "Changing or turning off the PIN needs the PIN you use now, typed by you. Do it in SessionVault's own dialog or settings (or with “vaultctl” at a terminal).",
        nb: "Å endre eller slå av PIN-koden krever PIN-koden du bruker nå, skrevet inn av deg. Gjør det i SessionVaults egen dialog eller innstillinger (eller med «vaultctl» i en terminal).")
    /// Changing or turning off the PIN asks for the current one first.
    public static let currentPINFirst = LocalizedText(
        en: "To change or turn off your PIN, first enter the PIN you use now.",
        nb: "For å endre eller slå av PIN-koden, skriv først inn PIN-koden du bruker nå.")
    /// `vaultctl apps revoke` named no app that has a grant.
    public static func noSuchApp(_ app: String) -> LocalizedText {
        LocalizedText(en: "No app called ‘\(app)’ is allowed any login. See the names in SessionVault's settings.",
                      nb: "Ingen app som heter «\(app)», har lov til noen innlogging. Se navnene i SessionVaults innstillinger.")
    }
}
