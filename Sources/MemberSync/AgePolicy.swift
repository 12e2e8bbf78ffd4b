import NationalID
import SodiumKit
import VaultProtocol

/// An optional per-provider minimum age (`min_age = 18` in a provider's
/// config). Checked right after a verified login, before a session is stored.
///
/// The age comes from the national ID when it encodes the birth date, else
/// from the provider's `birthdate` claim (`YYYY-MM-DD`). When neither gives a
/// date the login is refused: a limit that cannot be checked is not met.
public struct MinimumAgePolicy: Sendable, Equatable {
    public let minAge: Int

    public init(minAge: Int) {
        self.minAge = minAge
    }

    /// Nil when the person is old enough; otherwise `age_requirement` with its sentence.
    public func check(nationalID: NationalIDNumber?, birthdateClaim: String? = nil,
                      today: BirthDate = .today()) -> VaultFailure? {
        let born = nationalID?.birthDate ?? birthdateClaim.flatMap(BirthDate.init(iso:))
        guard let born, born.age(on: today) >= minAge else { return failure }
        return nil
    }

    /// The same from the login's raw national ID (an invalid one counts as absent).
    public func check(nationalID raw: SecureBytes?, birthdateClaim: String? = nil, options: ParseOptions = .default,
                      today: BirthDate = .today()) -> VaultFailure? {
        let number = raw.flatMap { try? NationalIDNumber(secure: $0, options: options) }
        return check(nationalID: number, birthdateClaim: birthdateClaim, today: today)
    }

    /// `age_requirement`, "You must be at least 18 to use this service" (the
    /// catalog's sentence for 18; the same sentence with the configured age otherwise).
    public var failure: VaultFailure {
        if minAge == 18 { return VaultFailure(.ageRequirement) }
        return VaultFailure(.ageRequirement, message: LocalizedText(
            en: "You must be at least \(minAge) to use this service",
            nb: "Du må være minst \(minAge) år for å bruke denne tjenesten"))
    }
}
