// A tiny seeded property-testing support shared by the test targets: no dependencies beyond the toolchain's Testing.
//
// Every property draws its cases from a `PropertyRandom` seeded from the run's seed and the property's name, so a run
// with the same seed draws the same cases. A failing case is reported with the seed, the case number and the case
// itself, and the command that reproduces it.

import Foundation
import RetryKitTesting
import Testing

/// The knobs of a property run, read once from the environment.
///
/// - `RETRYKIT_PROPERTY_SEED`: the seed (decimal or `0x` hexadecimal); a fixed default so that `swift test` is
///   reproducible.
/// - `RETRYKIT_PROPERTY_ITERATIONS`: the random cases per property, after the edge cases; 300 by default (a few
///   seconds for every property together). Raise it for a longer search, e.g. `RETRYKIT_PROPERTY_ITERATIONS=20000`.
public enum PropertySettings {
    /// The seed every property derives its cases from.
    public static let seed: UInt64 = {
        guard let text = ProcessInfo.processInfo.environment["RETRYKIT_PROPERTY_SEED"] else { return 0x5EED_2026 }
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if trimmed.lowercased().hasPrefix("0x") { return UInt64(trimmed.dropFirst(2), radix: 16) ?? 0x5EED_2026 }
        return UInt64(trimmed) ?? 0x5EED_2026
    }()

    /// The random cases each property checks, after its edge cases.
    public static let iterations: Int = {
        guard let text = ProcessInfo.processInfo.environment["RETRYKIT_PROPERTY_ITERATIONS"], let value = Int(text)
        else { return 100 }
        return Swift.max(value, 0)
    }()

    /// How to run the failing property again.
    static func reproduction(_ property: String) -> String {
        "RETRYKIT_PROPERTY_SEED=\(seed) RETRYKIT_PROPERTY_ITERATIONS=\(iterations) swift test --filter Properties "
            + "(property \"\(property)\")"
    }
}

/// A seeded generator (RetryKitTesting's SplitMix64) with helpers that favour edge values.
public struct PropertyRandom: RandomNumberGenerator, Sendable {
    private var bits: SeededRandomNumberGenerator

    /// A generator that starts from `seed`.
    public init(seed: UInt64) {
        bits = SeededRandomNumberGenerator(seed: seed)
    }

    /// A generator for `property`, derived from the run's seed and the property's name (FNV-1a).
    public init(property: String, seed: UInt64 = PropertySettings.seed) {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in property.utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
        }
        bits = SeededRandomNumberGenerator(seed: seed ^ hash)
    }

    /// The next 64 random bits.
    public mutating func next() -> UInt64 {
        bits.next()
    }

    /// `true` with probability `1/n`.
    public mutating func oneIn(_ n: Int) -> Bool {
        Int.random(in: 0..<Swift.max(n, 1), using: &self) == 0
    }

    /// One of `values` (which must not be empty).
    public mutating func pick<T>(_ values: [T]) -> T {
        values[Int.random(in: 0..<values.count, using: &self)]
    }

    /// The `Int` edges: 0, 1, −1, 2, the type's minimum and maximum.
    public static let intEdges: [Int] = [0, 1, -1, 2, Int.min, Int.max, Int.min + 1, Int.max - 1]

    /// An `Int`: an edge a third of the time, otherwise of a random magnitude and sign.
    public mutating func int() -> Int {
        if oneIn(3) { return pick(Self.intEdges) }
        let bits = Int.random(in: 0...63, using: &self)
        let magnitude = Int(truncatingIfNeeded: next() >> UInt64(64 - bits)) & Int.max
        return Bool.random(using: &self) ? magnitude : -magnitude
    }

    /// An `Int` in `range`, or an edge of `Int` a quarter of the time.
    public mutating func int(mostlyIn range: ClosedRange<Int>) -> Int {
        oneIn(4) ? pick(Self.intEdges) : Int.random(in: range, using: &self)
    }

    /// A `UInt`: 0, 1, 2, the maximum, or random of a random magnitude.
    public mutating func uint() -> UInt {
        if oneIn(3) { return pick([0, 1, 2, UInt.max, UInt.max - 1, UInt(Int.max)]) }
        let bits = Int.random(in: 0...64, using: &self)
        return bits == 0 ? 0 : UInt(truncatingIfNeeded: next() >> UInt64(64 - bits))
    }

    /// The `Duration` edges: zero, one nanosecond and one attosecond either side, a second either side, the
    /// saturation limit (10⁹ s) and one nanosecond past it, `Int64` extremes in seconds and in nanoseconds, and beyond.
    public static let durationEdges: [Duration] = [
        .zero, .nanoseconds(1), .nanoseconds(-1), Duration(secondsComponent: 0, attosecondsComponent: 1),
        Duration(secondsComponent: 0, attosecondsComponent: -1), .seconds(1), .seconds(-1),
        .seconds(1_000_000_000), .seconds(1_000_000_000) + .nanoseconds(1), .seconds(1_000_000_000) - .nanoseconds(1),
        .seconds(Int64.max), .seconds(Int64.min), .nanoseconds(Int64.max), .nanoseconds(Int64.min),
        .seconds(Int64.max) + .seconds(Int64.max), .seconds(Int64.min) + .seconds(Int64.min),
    ]

    /// A `Duration`: an edge a third of the time, otherwise random from attoseconds to centuries, either sign.
    public mutating func duration() -> Duration {
        if oneIn(3) { return pick(Self.durationEdges) }
        switch Int.random(in: 0..<4, using: &self) {
        case 0: return .nanoseconds(Int64.random(in: -1_000...1_000_000_000, using: &self))
        case 1: return .milliseconds(Int64.random(in: -100...100_000, using: &self))
        case 2:
            return Duration(
                secondsComponent: Int64.random(in: -5_000_000_000...5_000_000_000, using: &self),
                attosecondsComponent: Int64.random(in: 0..<1_000_000_000_000_000_000, using: &self))
        default: return .seconds(Int64.random(in: Int64.min...Int64.max, using: &self))
        }
    }

    /// A short positive `Duration` (1 ms to 10 s), for operations a test scripts.
    public mutating func shortDuration() -> Duration {
        .milliseconds(Int64.random(in: 1...10_000, using: &self))
    }

    /// The `Double` edges: 0, ±1, NaN, ±infinity, the largest finite and the smallest positive values.
    public static let doubleEdges: [Double] = [
        0, -0.0, 1, -1, 0.5, 2, .nan, .infinity, -.infinity, .greatestFiniteMagnitude, -.greatestFiniteMagnitude,
        .leastNonzeroMagnitude,
    ]

    /// A `Double`: an edge a third of the time, otherwise random in −3…30 or of a random exponent.
    public mutating func double() -> Double {
        if oneIn(3) { return pick(Self.doubleEdges) }
        if Bool.random(using: &self) { return Double.random(in: -3...30, using: &self) }
        return Double(
            sign: Bool.random(using: &self) ? .minus : .plus, exponent: Int.random(in: -1074...1023, using: &self),
            significand: Double.random(in: 1..<2, using: &self))
    }
}

/// `d` as Swift source that builds exactly it, so that a reported case can be pasted into a test: `.seconds(5)`,
/// `.seconds(1) + .nanoseconds(500)`, or `Duration(secondsComponent:attosecondsComponent:)`.
public func exact(_ d: Duration) -> String {
    // `components` traps beyond `Int64` seconds: describe such a duration as a sum.
    if d > .seconds(Int64.max) { return "(.seconds(Int64.max) + \(exact(d - .seconds(Int64.max))))" }
    if d < .seconds(Int64.min) { return "(.seconds(Int64.min) + \(exact(d - .seconds(Int64.min))))" }
    let (seconds, attoseconds) = d.components
    if attoseconds == 0 { return ".seconds(\(seconds))" }
    if attoseconds % 1_000_000_000 == 0 {
        return seconds == 0
            ? ".nanoseconds(\(attoseconds / 1_000_000_000))"
            : "(.seconds(\(seconds)) + .nanoseconds(\(attoseconds / 1_000_000_000)))"
    }
    return "Duration(secondsComponent: \(seconds), attosecondsComponent: \(attoseconds))"
}

/// `d` as ``exact(_:)`` writes it, or `nil`.
public func exact(_ d: Duration?) -> String {
    d.map { exact($0) } ?? "nil"
}

extension PropertyRandom {
    /// A random generator for a strategy under test: seeded, or stuck at 0 or at `UInt64.max` (the extremes a jitter
    /// must survive).
    public mutating func generator() -> PropertyGenerator {
        switch Int.random(in: 0..<4, using: &self) {
        case 0: return PropertyGenerator(.constant(0))
        case 1: return PropertyGenerator(.constant(.max))
        default: return PropertyGenerator(.seeded(next()))
        }
    }
}

/// A random number generator handed to the code under test: seeded, or constant (0 or `UInt64.max`).
public struct PropertyGenerator: RandomNumberGenerator, Sendable, CustomStringConvertible {
    /// What the generator returns.
    public enum Kind: Sendable {
        /// Always this value.
        case constant(UInt64)
        /// A seeded sequence.
        case seeded(UInt64)
    }

    private var kind: Kind
    private var random: PropertyRandom

    /// A generator of `kind`.
    public init(_ kind: Kind) {
        self.kind = kind
        if case .seeded(let seed) = kind {
            random = PropertyRandom(seed: seed)
        } else {
            random = PropertyRandom(seed: 0)
        }
    }

    /// The next value.
    public mutating func next() -> UInt64 {
        if case .constant(let value) = kind { return value }
        return random.next()
    }

    /// How to build it again.
    public var description: String {
        switch kind {
        case .constant(let value): return "constant(\(value))"
        case .seeded(let seed): return "seeded(\(seed))"
        }
    }
}

/// Checks `property` on every edge case, then on `iterations` random cases, and records an issue for the first
/// failing case with the seed and the case.
///
/// - Parameters:
///   - name: The property, as the failure report names it.
///   - edgeCases: Cases checked first, always.
///   - iterations: The random cases after the edge cases. ``PropertySettings/iterations`` by default.
///   - generate: Draws one random case.
///   - property: The problems with one case; empty when the property holds.
/// - Returns: How many cases were checked.
@discardableResult
public func checkProperty<Case>(
    _ name: String,
    edgeCases: [Case] = [],
    iterations: Int = PropertySettings.iterations,
    sourceLocation: SourceLocation = #_sourceLocation,
    generate: (inout PropertyRandom) -> Case,
    property: (Case) throws -> [String]
) rethrows -> Int {
    var random = PropertyRandom(property: name)
    var index = 0
    for testCase in edgeCases + (0..<iterations).lazy.map({ _ in generate(&random) }) {
        let problems = try property(testCase)
        if !problems.isEmpty {
            report(name, index: index, edgeCases: edgeCases.count, testCase, problems, sourceLocation)
            return index + 1
        }
        index += 1
    }
    return index
}

/// The `async` form of ``checkProperty(_:edgeCases:iterations:sourceLocation:generate:property:)``.
@discardableResult
public func checkProperty<Case>(
    _ name: String,
    edgeCases: [Case] = [],
    iterations: Int = PropertySettings.iterations,
    sourceLocation: SourceLocation = #_sourceLocation,
    generate: (inout PropertyRandom) -> Case,
    property: (Case) async throws -> [String]
) async rethrows -> Int {
    var random = PropertyRandom(property: name)
    var cases = edgeCases
    for _ in 0..<iterations { cases.append(generate(&random)) }
    for (index, testCase) in cases.enumerated() {
        let problems = try await property(testCase)
        if !problems.isEmpty {
            report(name, index: index, edgeCases: edgeCases.count, testCase, problems, sourceLocation)
            return index + 1
        }
    }
    return cases.count
}

private func report<Case>(
    _ name: String, index: Int, edgeCases: Int, _ testCase: Case, _ problems: [String],
    _ sourceLocation: SourceLocation
) {
    let which = index < edgeCases ? "edge case \(index)" : "random case \(index - edgeCases)"
    let message = """
        property "\(name)" failed on \(which) (seed \(PropertySettings.seed)): \(testCase)
          \(problems.prefix(5).joined(separator: "\n  "))
          reproduce: \(PropertySettings.reproduction(name))
        """
    print(message)
    Issue.record(Comment(rawValue: message), sourceLocation: sourceLocation)
}
