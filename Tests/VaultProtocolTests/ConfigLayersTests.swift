import DaemonConfig
import XCTest

/// The organization's file under the person's (ConfigLayers): the person can
/// change their comfort and be stricter, never whom they log in with.
final class ConfigLayersTests: XCTestCase {
    func parse(_ text: String) throws -> FileConfig { try FileConfig.parse(text) }

    let organization = """
        per_app = true
        idle_timeout = 600
        max_unlocked = 3600
        keyring = "secret-service"
        [pin]
        min_length = 6
        free_attempts = 5
        [fingerprint]
        allow_stub_reader = false
        [providers.vipps]
        profile = "vipps"
        client_id = "org-members-app"
        backend = "https://members.example.org/vipps/token"
        [members]
        registry = "none"
        """

    /// A person's file (or a program writing it) cannot send logins elsewhere
    /// or weaken the organization's rules; each attempt is named for the log.
    func testThePersonCannotRedirectLoginsOrWeakenTheRules() throws {
        let person = try parse("""
            per_app = false
            idle_timeout = 0
            max_unlocked = 0
            keyring = "file"
            [pin]
            min_length = 4
            free_attempts = 50
            [fingerprint]
            allow_stub_reader = true
            [providers.vipps]
            profile = "vipps"
            client_id = "attacker"
            issuer = "https://phish.example/"
            [members]
            registry = "http"
            url = "https://phish.example/members"
            """)
        let (merged, overridden) = ConfigLayers.merge(organization: try parse(organization), person: person)
        XCTAssertEqual(merged.providers?["vipps"]?.client_id, "org-members-app")
        XCTAssertNil(merged.providers?["vipps"]?.issuer)
        XCTAssertEqual(merged.providers?["vipps"]?.backend, "https://members.example.org/vipps/token")
        XCTAssertEqual(merged.members?.registry, "none")
        XCTAssertNil(merged.members?.url)
        XCTAssertEqual(merged.per_app, true)
        XCTAssertEqual(merged.idle_timeout, 600)
        XCTAssertEqual(merged.max_unlocked, 3600)
        XCTAssertEqual(merged.keyring, "secret-service")
        XCTAssertEqual(merged.pin?.min_length, 6)
        XCTAssertEqual(merged.pin?.free_attempts, 5)
        XCTAssertEqual(merged.fingerprint?.allow_stub_reader, false)
        XCTAssertEqual(Set(overridden), ["[providers]", "[members]", "per_app", "idle_timeout", "max_unlocked", "keyring",
                                         "pin.min_length", "pin.free_attempts", "fingerprint.allow_stub_reader"])
    }

    /// Stricter and comfort settings of the person's own are kept, and nothing is reported.
    func testThePersonMayBeStricterAndSetTheirComfort() throws {
        let person = try parse("""
            idle_timeout = 120
            max_unlocked = 900
            prompt_timeout = 90
            log_level = "debug"
            pinentry = "pinentry-gnome3"
            [pin]
            min_length = 8
            free_attempts = 3
            [fingerprint]
            reader = "none"
            """)
        let (merged, overridden) = ConfigLayers.merge(organization: try parse(organization), person: person)
        XCTAssertEqual(merged.idle_timeout, 120)
        XCTAssertEqual(merged.max_unlocked, 900)
        XCTAssertEqual(merged.prompt_timeout, 90)
        XCTAssertEqual(merged.log_level, "debug")
        XCTAssertEqual(merged.pinentry, "pinentry-gnome3")
        XCTAssertEqual(merged.pin?.min_length, 8)
        XCTAssertEqual(merged.pin?.free_attempts, 3)
        XCTAssertEqual(merged.fingerprint?.reader, "none")
        XCTAssertEqual(merged.providers?["vipps"]?.client_id, "org-members-app", "the organization's providers")
        XCTAssertEqual(overridden, [])
    }

    /// Without an organization's file, the person's file is the config, unchanged.
    func testWithoutAnOrganizationFileThePersonsFileIsTheConfig() throws {
        let person = try parse(organization)
        let (merged, overridden) = ConfigLayers.merge(organization: FileConfig(), person: person)
        XCTAssertEqual(String(describing: merged), String(describing: person))
        XCTAssertEqual(overridden, [])
    }

    /// Every setting the organization sets reaches the merged config when the
    /// person sets nothing: a setting added to FileConfig but forgotten by
    /// ConfigLayers fails here.
    /// The security chip: required over auto over off, whoever says it; where it is: the person's.
    func testTheStricterChipSettingWins() throws {
        for (org, person, wins) in [("auto", "off", "auto"), ("off", "required", "required"), ("required", "auto", "required"),
                                    ("off", "off", "off")] {
            let (merged, _) = ConfigLayers.merge(organization: try parse("tpm = \"\(org)\"\n"),
                                                 person: try parse("tpm = \"\(person)\"\ntpm_device = \"swtpm:path=/p\"\n"))
            XCTAssertEqual(merged.tpm, wins, "\(org) + \(person)")
            XCTAssertEqual(merged.tpm_device, "swtpm:path=/p")
        }
        let (unset, _) = ConfigLayers.merge(organization: FileConfig(), person: try parse("tpm = \"off\"\n"))
        XCTAssertEqual(unset.tpm, "off", "the organization's file says nothing: the person's setting stands")
    }

    func testEverySettingOfTheOrganizationReachesTheConfig() throws {
        let org = try parse("""
            socket = "/run/x.sock"
            data_dir = "/srv/x"
            keyring = "file"
            idle_timeout = 1
            max_unlocked = 2
            fingerprint_max_hours = 3
            prompt_timeout = 4
            pinentry = "p"
            connection_idle_timeout = 5
            max_connections = 6
            lock_on_screen_lock = false
            log_level = "error"
            per_app = false
            tpm = "required"
            tpm_device = "swtpm:path=/t"
            [pin]
            min_length = 7
            free_attempts = 8
            first_delay = 9
            max_delay = 10
            argon_memory_mib = 11
            argon_ops = 12
            [fingerprint]
            reader = "none"
            stub_state = "/x"
            allow_stub_reader = true
            scan_timeout = 13
            [plugins]
            dir = "/p"
            [members]
            registry = "none"
            [providers.bankid]
            client_id = "c"
            """)
        let (merged, _) = ConfigLayers.merge(organization: org, person: FileConfig())
        XCTAssertEqual(String(describing: merged), String(describing: org))
        for child in Mirror(reflecting: org).children {
            XCTAssertFalse(String(describing: child.value) == "nil", "the test sets every top-level setting: \(child.label ?? "?")")
        }
    }
}
