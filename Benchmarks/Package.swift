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
        .target(name: "BenchmarkSupport", path: "Sources/BenchmarkSupport"),

        // The pure backoff core, through its public API.
        .executableTarget(
            name: "BackoffCore",
            dependencies: [
                .product(name: "RetryKit", package: "RetryKit"),
                .product(name: "Benchmark", package: "benchmark"),
                "BenchmarkSupport",
            ],
            path: "Benchmarks/BackoffCore",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        // To come (added by the lead with the runners): callback runner vs hand-written recursion, async `retry` vs a
        // direct call, bridges, memory, timer accuracy, scale. Each as `Benchmarks/<Name>/` with the same plugin.

        // The discrete-event simulation of the AWS "Exponential Backoff And Jitter" workload.
        .executableTarget(
            name: "jitter-sim",
            dependencies: [.product(name: "RetryKit", package: "RetryKit"), "BenchmarkSupport"],
            path: "Sources/JitterSimulation"
        ),
    ]
)
