/// The source of randomness a jittered ``BackoffStrategy`` draws from.
///
/// The system generator needs no state; any other generator is kept in a locked box so that a strategy value stays
/// `Sendable` and a seeded generator advances exactly once per draw, whichever thread draws.
package enum RandomSource: Sendable {
    /// `SystemRandomNumberGenerator`, which has no state.
    case system
    /// A caller-supplied generator, shared by every copy of the strategy that holds it.
    case shared(Locked<any RandomNumberGenerator>)

    package init<T: RandomNumberGenerator>(_ generator: T) {
        if generator is SystemRandomNumberGenerator {
            self = .system
        } else {
            self = .shared(Locked(generator))
        }
    }

    /// A uniformly distributed value in `[0, 1)` with 53 bits of precision.
    package func unit() -> Double {
        let bits: UInt64
        switch self {
        case .system:
            var generator = SystemRandomNumberGenerator()
            bits = generator.next()
        case .shared(let box):
            bits = box.withLock { $0.next() }
        }
        return Double(bits >> 11) * 0x1p-53
    }
}
