/// A small deterministic `RandomNumberGenerator` (SplitMix64) for reproducible jitter in tests and simulations.
///
/// Pass it to any jittered strategy to make its delays repeatable:
///
/// ```swift
/// let backoff: BackoffStrategy<ContinuousClock> =
///     .exponential(a: .milliseconds(100), b: 2).max(.seconds(5)).jitter(using: SeededRandomNumberGenerator(seed: 42))
/// ```
///
/// The same seed gives the same sequence on every platform. It is a value type: a strategy keeps its own copy, which
/// advances with every draw, and two strategies built from the same seed draw the same delays. Not suitable for
/// anything but tests and simulations.
public struct SeededRandomNumberGenerator: RandomNumberGenerator, Sendable {
    private var state: UInt64

    /// Creates a generator whose sequence is fixed by `seed`.
    public init(seed: UInt64) {
        state = seed
    }

    /// The next value of the SplitMix64 sequence.
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
