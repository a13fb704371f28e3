/// The source of randomness a jittered ``BackoffStrategy`` draws from.
///
/// The system generator needs no state; any other generator is kept in a ``SharedGenerator`` so that a strategy value
/// stays `Sendable` and a seeded generator advances exactly once per draw, whichever thread draws. The generator is
/// never called while a lock is held.
@usableFromInline
package enum RandomSource: Sendable {
    /// `SystemRandomNumberGenerator`, which has no state.
    case system
    /// A caller-supplied generator, shared by every copy of the strategy that holds it.
    case shared(SharedGenerator)

    package init<T: RandomNumberGenerator>(_ generator: T) {
        if generator is SystemRandomNumberGenerator {
            self = .system
        } else {
            self = .shared(SharedGenerator(generator))
        }
    }

    /// A uniformly distributed value in `[0, 1)` with 53 bits of precision.
    package func unit() -> Double {
        let bits: UInt64
        switch self {
        case .system:
            var generator = SystemRandomNumberGenerator()
            bits = generator.next()
        case .shared(let shared):
            bits = shared.next()
        }
        return Double(bits >> 11) * 0x1p-53
    }
}

/// A caller's generator shared by the copies of a strategy, drawn from without calling it under a lock.
///
/// A draw copies the generator and its version out of the lock, calls `next()` on the copy with no lock held, and
/// stores the advanced copy back only if no other draw was stored meanwhile; otherwise it draws again from the newer
/// state. So draws are serialized — each stored draw advances the generator exactly once, in the order they are
/// stored — while the generator itself may touch RetryKit (cancel a handle, start a retrier, even draw from the same
/// strategy) without deadlocking. A generator with reference semantics is called directly, possibly from several
/// threads at once, and must be thread-safe itself.
@usableFromInline
package final class SharedGenerator: Sendable {
    private struct State {
        var generator: any RandomNumberGenerator
        /// Bumped by every stored draw.
        var version: UInt64 = 0
    }

    private let state: Locked<State>

    init(_ generator: some RandomNumberGenerator) {
        state = Locked(State(generator: generator))
    }

    /// The next 64 random bits.
    func next() -> UInt64 {
        while true {
            var (generator, version) = state.withLock { ($0.generator, $0.version) }
            let bits = generator.next()  // the caller's code: no lock held
            let stored: Bool = state.withLock { s in
                guard s.version == version else { return false }
                s.generator = generator
                s.version &+= 1
                return true
            }
            if stored { return bits }
        }
    }
}
