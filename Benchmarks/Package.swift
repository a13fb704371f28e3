// swift-tools-version: 6.1
// RetryKit's benchmarks and the jitter simulation. A separate package, so that RetryKit itself keeps zero
// dependencies: only this package depends on ordo-one/benchmark.
//
// - Benchmark targets live in `Benchmarks/<Name>/`, where the benchmark plugin discovers them
//   (`swift package benchmark`).
// - `jitter-sim` is a plain executable (`swift run -c release jitter-sim`), not a benchmark target.
//
// See README.md in this directory, or run `./run.sh` for everything at once.
import PackageDescription

let package = Package(
    name: "RetryKitBenchmarks",
    platforms: [.macOS(.v13)],
    dependencies: [
        .package(name: "RetryKit", path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        // A seeded generator shared by the benchmarks and the simulation.
        .target(
            name: "BenchmarkSupport", dependencies: [.product(name: "RetryKitTesting", package: "RetryKit")],
            path: "Sources/BenchmarkSupport"),

        // The pure backoff core, through its public API.
        benchmark("BackoffCore"),
        // The runners against hand-written baselines: callback runner, async `retry`, bridges (time and mallocs).
        benchmark("Runners", dependencies: ["Workloads"]),

        // Memory per waiting retrier, timer lateness and scale: figures that are not a time per call (see its header).
        .executableTarget(
            name: "runner-load",
            dependencies: [.product(name: "RetryKit", package: "RetryKit")],
            path: "Sources/RunnerLoad"
        ),

        // Cancel -> completion of 1,000 concurrent URLSession requests cancelled at random moments, against a local
        // server: RetryKit's callback and async styles and plain URLSession.
        .executableTarget(
            name: "http-cancel-load",
            dependencies: [
                .product(name: "RetryKitHTTP", package: "RetryKit"),
                .product(name: "RetryKitTesting", package: "RetryKit"),
            ],
            path: "Sources/HTTPCancelLoad"
        ),

        // The virtual-time test kit at scale: 100,000 items on a VirtualScheduler, 10,000 sleepers on a VirtualClock.
        .executableTarget(
            name: "TestKit",
            dependencies: [.product(name: "RetryKitTesting", package: "RetryKit")],
            path: "Sources/TestKit"
        ),

        // Builds the runner table of README.md from the harness report and runner-load's output (see run.sh).
        .executableTarget(name: "bench-report", path: "Sources/BenchReport"),

        // The issue-12 workloads (RetryKit paths beside their baselines), shared by instr-workloads and alloc-check.
        .target(
            name: "Workloads",
            dependencies: [.product(name: "RetryKit", package: "RetryKit"), "SeedStyleRetry"],
            path: "Sources/Workloads"
        ),
        // The seed library's documented attempt loop, rewritten as a baseline (its own module, like a dependency).
        .target(name: "SeedStyleRetry", path: "Sources/SeedStyleRetry"),
        // One workload N times, for instructions.sh (valgrind --tool=callgrind).
        .executableTarget(name: "instr-workloads", dependencies: ["Workloads"], path: "Sources/InstrWorkloads"),
        // Counts the process's calls of the C allocator (Linux/glibc), for alloc-check.
        .target(name: "MallocCounter", path: "Sources/MallocCounter"),
        // Allocation counts per iteration asserted against limits (run by .ci/run).
        .executableTarget(
            name: "alloc-check", dependencies: ["Workloads", "MallocCounter"], path: "Sources/AllocCheck"),

        // The discrete-event simulation of the AWS "Exponential Backoff And Jitter" workload.
        .executableTarget(
            name: "jitter-sim",
            dependencies: [
                .product(name: "RetryKit", package: "RetryKit"), .product(name: "RetryKitHTTP", package: "RetryKit"),
                "BenchmarkSupport",
            ],
            path: "Sources/JitterSimulation"
        ),
    ]
)

/// A benchmark target in `Benchmarks/<name>/`, where the benchmark plugin discovers it: RetryKit, the harness and the
/// shared generator, plus `dependencies`.
func benchmark(_ name: String, dependencies: [Target.Dependency] = []) -> Target {
    .executableTarget(
        name: name,
        dependencies: [
            .product(name: "RetryKit", package: "RetryKit"),
            .product(name: "Benchmark", package: "benchmark"),
            "BenchmarkSupport",
        ] + dependencies,
        path: "Benchmarks/\(name)",
        plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
    )
}
