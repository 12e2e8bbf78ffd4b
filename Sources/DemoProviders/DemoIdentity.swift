import SodiumKit

/// A synthetic test person for the demo providers. Nothing here is a real person:
/// names are placeholders and the national identity numbers are *synthetic test
/// numbers* (month + 80, both mod-11 check digits valid), which no real person has.
public struct DemoIdentity: Sendable, Equatable, CustomStringConvertible {
    /// The value for `demo_user=` in an authorization URL, and the form button's value.
    public let id: String
    public let givenName: String
    public let familyName: String
    /// ISO 8601 date (the real date; only the national ID's month carries the +80).
    public let birthdate: String
    /// Synthetic fødselsnummer: `DD(MM+80)YYIIIKK`.
    public let nationalID: String
    /// Vipps style: country code and number, no plus sign.
    public let phoneNumber: String
    public let email: String
    /// The member organisation (the `org` claim).
    public let organization: String
    /// Roles in the organisation (the `roles` claim): `peer_mentor`, `coordinator`, …
    public let roles: [String]
    /// The member registry's other organisations for this person, with the roles
    /// in each (a member of several is asked which one to use after a login).
    public let otherMemberships: [Membership]

    public struct Membership: Sendable, Equatable {
        public let organization: String
        public let roles: [String]
    }

    public var name: String { "\(givenName) \(familyName)" }

    /// Never prints the national ID (so an identity dropped into a log line stays harmless).
    public var description: String { "DemoIdentity(\(id), \(name), \(organization))" }

    public init(id: String, givenName: String, familyName: String, birthdate: String, nationalID: String,
                phoneNumber: String, email: String, organization: String, roles: [String],
                otherMemberships: [Membership] = []) {
        self.id = id
        self.givenName = givenName
        self.familyName = familyName
        self.birthdate = birthdate
        self.nationalID = nationalID
        self.phoneNumber = phoneNumber
        self.email = email
        self.organization = organization
        self.roles = roles
        self.otherMemberships = otherMemberships
    }

    /// The built-in test people, in the order the login page offers them.
    public static let all: [DemoIdentity] = [
        DemoIdentity(id: "kari", givenName: "Kari", familyName: "Nordmann", birthdate: "1985-03-15",
                     nationalID: "15838512329", phoneNumber: "4791234567", email: "kari.nordmann@example.test",
                     organization: "Mentorhuset Oslo", roles: ["peer_mentor"]),
        DemoIdentity(id: "ola", givenName: "Ola", familyName: "Nordmann", birthdate: "1990-12-01",
                     nationalID: "01929023583", phoneNumber: "4798765432", email: "ola.nordmann@example.test",
                     organization: "Likepersonsnettverket Bergen", roles: ["coordinator"],
                     otherMemberships: [Membership(organization: "Mentorhuset Oslo", roles: ["peer_mentor"])]),
        DemoIdentity(id: "per", givenName: "Per", familyName: "Hansen", birthdate: "1968-07-24",
                     nationalID: "24876834525", phoneNumber: "4795551234", email: "per.hansen@example.test",
                     organization: "Mentorhuset Tromsø", roles: ["peer_mentor", "coordinator"]),
    ]

    public static func named(_ id: String) -> DemoIdentity? {
        all.first { $0.id == id }
    }

    /// A stable identifier for this person at one provider (`bankid_altsub`, Vipps `sub`):
    /// the same across logins and restarts, different between providers. UUID-shaped.
    public func stableSubject(provider: String) -> String {
        let digest = Digest.sha256(Array("sessionvault-demo/\(provider)/\(id)".utf8))
        var b = Array(digest.prefix(16))
        b[6] = (b[6] & 0x0F) | 0x80  // version 8 (custom)
        b[8] = (b[8] & 0x3F) | 0x80  // RFC 9562 variant
        return uuidString(b)
    }
}

/// Role names for the login page, in Norwegian and English.
func roleLabel(_ role: String) -> (nb: String, en: String) {
    switch role {
    case "peer_mentor": return ("likeperson", "peer mentor")
    case "coordinator": return ("koordinator", "coordinator")
    default: return (role, role)
    }
}
