@_exported import RetryKitTesting

/// The benchmarks' seedable generator: RetryKitTesting's SplitMix64, so that benchmarks and the jitter simulation are
/// reproducible from a printed seed.
public typealias SplitMix64 = SeededRandomNumberGenerator

extension SeededRandomNumberGenerator {
    /// A uniformly distributed value in `[0, 1)` with 53 bits of precision.
    public mutating func nextUnit() -> Double {
        Double(next() >> 11) * 0x1p-53
    }

    /// Derives an independent seed for stream `index` of `seed` (runs, strategies, clients), so that streams do not
    /// overlap and adding a stream does not shift the others.
    public static func derive(_ seed: UInt64, _ index: UInt64) -> UInt64 {
        var mixer = SeededRandomNumberGenerator(seed: seed ^ (index &* 0xD1B5_4A32_D192_ED03))
        return mixer.next()
    }
}
