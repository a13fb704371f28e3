/// A small deterministic `RandomNumberGenerator` (the SplitMix64 algorithm) for reproducible jitter in tests.
///
/// The same seed always yields the same sequence, on every platform. It is a value type: a copy continues from the
/// copied state independently. Not suitable for anything but tests and simulations.
struct SeededGenerator: RandomNumberGenerator, Sendable {
    private var state: UInt64

    /// Creates a generator whose sequence is fixed by `seed`.
    init(seed: UInt64) {
        state = seed
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var mixed = state
        mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
        mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
        return mixed ^ (mixed >> 31)
    }
}
