/// The source of randomness a jittered ``BackoffStrategy`` draws from.
///
/// The system generator needs no state; any other generator is kept in a ``SharedGenerator`` so that a strategy value
/// stays `Sendable` and a seeded generator advances exactly once per draw it serves, whichever thread draws. The
/// generator is never called while a lock is held, nor by two draws at once.
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
/// A draw takes the generator out under the lock, calls `next()` on it with no lock held, and puts the advanced
/// generator back. A draw that finds the generator out — one nested inside the generator's own `next()` (a generator
/// that draws from the strategy it jitters), or one on another thread at the same moment — does not wait or retry: it
/// draws from `SystemRandomNumberGenerator` instead, and leaves the caller's generator alone. So every draw ends after
/// at most one call of the caller's generator, whatever that generator does (cancel a handle, start a retrier, draw
/// from the same strategy, every time), and the generator is never called by two draws at once, even one with
/// reference semantics. Each draw that uses the caller's generator advances it exactly once: draws that do not overlap
/// (those of one retrier, or of retriers driven by a virtual scheduler) follow the seeded sequence, in order; the
/// values a generator never saw are still uniform, only not reproducible.
@usableFromInline
package final class SharedGenerator: Sendable {
    /// The caller's generator; `nil` while a draw has it out.
    private let state: Locked<(any RandomNumberGenerator)?>

    init(_ generator: some RandomNumberGenerator) {
        state = Locked(generator)
    }

    /// The next 64 random bits.
    func next() -> UInt64 {
        let taken: (any RandomNumberGenerator)? = state.withLock { generator in
            defer { generator = nil }
            return generator
        }
        guard var generator = taken else {
            var system = SystemRandomNumberGenerator()  // another draw has it: nested, or concurrent
            return system.next()
        }
        let bits = generator.next()  // the caller's code: no lock held
        state.withLock { $0 = generator }
        return bits
    }
}
