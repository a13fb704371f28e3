/// A small, fast, seedable random number generator (SplitMix64), so that benchmarks and the jitter simulation are
/// reproducible from a printed seed.
///
/// SplitMix64 passes BigCrush and needs one `UInt64` of state; it is more than good enough for drawing backoff delays
/// and network latencies. Not for cryptography.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    /// A generator whose sequence is fully determined by `seed`.
    public init(seed: UInt64) {
        state = seed
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A uniformly distributed value in `[0, 1)` with 53 bits of precision.
    public mutating func nextUnit() -> Double {
        Double(next() >> 11) * 0x1p-53
    }

    /// Derives an independent seed for stream `index` of `seed` (runs, strategies, clients), so that streams do not
    /// overlap and adding a stream does not shift the others.
    public static func derive(_ seed: UInt64, _ index: UInt64) -> UInt64 {
        var mixer = SplitMix64(seed: seed ^ (index &* 0xD1B5_4A32_D192_ED03))
        return mixer.next()
    }
}
