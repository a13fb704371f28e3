#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Whether the benchmarks run as a smoke test (`RETRYKIT_BENCH_SMOKE=1`, as CI does): one short pass of each, to
/// show that they build and run, not to measure anything.
public let benchmarkSmoke: Bool = getenv("RETRYKIT_BENCH_SMOKE").map { String(cString: $0) == "1" } ?? false

/// `duration`, or 20 ms in a smoke run.
public func benchmarkMaxDuration(_ duration: Duration) -> Duration {
    benchmarkSmoke ? .milliseconds(20) : duration
}

/// `count`, or 2 in a smoke run.
public func benchmarkMaxIterations(_ count: Int) -> Int {
    benchmarkSmoke ? 2 : count
}
