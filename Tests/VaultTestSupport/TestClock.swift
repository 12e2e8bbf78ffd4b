import Foundation
import Locking

/// A clock a test moves by hand: the code under test reads it (the broker's
/// timers, a demo provider's token lifetimes, the member sync's back-off), so
/// time passes without the test sleeping. Starts at the wall clock's seconds.
public final class TestClock: Sendable {
    private let value: Locked<Double>

    public init(start: Double = Date().timeIntervalSince1970) {
        value = Locked(start)
    }

    /// Seconds since 1970, as the clock says now.
    public var now: Double { value.withLock { $0 } }
    /// The same, in whole seconds.
    public var seconds: Int64 { Int64(now) }

    public func advance(_ seconds: Double) { value.withLock { $0 += seconds } }

    /// The clock as the closure the code under test takes.
    public var reading: @Sendable () -> Double { { [value] in value.withLock { $0 } } }
    public var readingSeconds: @Sendable () -> Int64 { { [value] in Int64(value.withLock { $0 }) } }
}
