/// The stable error codes of protocol version 1. Clients switch on these;
/// the `message` beside them is for people.
public enum ErrorCode: String, Sendable, CaseIterable, Codable {
    case badRequest = "bad_request"
    case forbidden
    case locked
    case noSession = "no_session"
    case notEnrolled = "not_enrolled"
    case noMatch = "no_match"
    case lockedOut = "locked_out"
    case enrollmentChanged = "enrollment_changed"
    case factorUnavailable = "factor_unavailable"
    case cancelled
    case providerUnavailable = "provider_unavailable"
    case loginFailed = "login_failed"
    case timeout
    case sessionExpired = "session_expired"
    case stateMismatch = "state_mismatch"
    case tokenInvalid = "token_invalid"
    case ageRequirement = "age_requirement"
    case rateLimited = "rate_limited"
    case appNotAllowed = "app_not_allowed"
    case `internal`
}

/// A failure as it travels to a client: a code, the sentence for the person
/// (chosen by language when the response is written), and machine-readable extras
/// (`factors`, `attempts_left`, `retry_after`, `alternatives`).
///
/// Failures never carry tokens, PINs or national identity numbers: their text
/// comes only from the message catalog, filled with counts and names.
public struct VaultFailure: Error, Sendable, Equatable {
    public var code: ErrorCode
    public var message: LocalizedText
    public var extra: [String: JSON]

    public init(_ code: ErrorCode, message: LocalizedText? = nil, extra: [String: JSON] = [:]) {
        self.code = code
        self.message = message ?? Messages.standard(code)
        self.extra = extra
    }

    public func json(_ language: Language) -> JSON {
        var o = extra
        o["code"] = .string(code.rawValue)
        o["message"] = .string(message.text(language))
        return .object(o)
    }

    // Common shapes, so call sites stay short and consistent.
    public static func badRequest(_ detail: LocalizedText? = nil) -> VaultFailure {
        VaultFailure(.badRequest, message: detail)
    }
    public static func locked(factors: [String]) -> VaultFailure {
        VaultFailure(.locked, message: factors.isEmpty ? Messages.lockedNoFactor : nil,
                     extra: ["factors": .array(factors.map { .string($0) })])
    }
    public static func lockedOut(retryAfter seconds: Int, factors: [String] = []) -> VaultFailure {
        VaultFailure(.lockedOut, message: Messages.lockedOut(seconds: seconds),
                     extra: ["retry_after": .int(Int64(seconds)), "factors": .array(factors.map { .string($0) })])
    }
    public static func tooManyConnections(limit: Int) -> VaultFailure {
        VaultFailure(.rateLimited, message: Messages.tooManyConnections(limit: limit), extra: ["retry_after": .int(1)])
    }
    public static func tooManyRequestsInFlight(limit: Int) -> VaultFailure {
        VaultFailure(.rateLimited, message: Messages.tooManyRequestsInFlight(limit: limit), extra: ["retry_after": .int(1)])
    }
    public static func noMatch(attemptsLeft: Int) -> VaultFailure {
        VaultFailure(.noMatch, message: Messages.noMatch(attemptsLeft: attemptsLeft),
                     extra: ["attempts_left": .int(Int64(attemptsLeft))])
    }
    /// `no_session`, for `account` when one was named.
    public static func noSession(_ account: String?) -> VaultFailure {
        VaultFailure(.noSession, message: account.map(Messages.noSessionNamed))
    }
    public static func `internal`() -> VaultFailure { VaultFailure(.internal) }
}
