// swift-tools-version: 6.0
// RetryKit has no package dependencies. Benchmark tooling lives in the nested package `Benchmarks/`.
import PackageDescription

let package = Package(
    name: "RetryKit",
    platforms: [.macOS(.v13), .iOS(.v16), .tvOS(.v16), .watchOS(.v9)],
    products: [
        .library(name: "RetryKit", targets: ["RetryKit"]),
        .library(name: "RetryKitHTTP", targets: ["RetryKitHTTP"]),
        .library(name: "RetryKitTesting", targets: ["RetryKitTesting"]),
    ],
    targets: [
        .target(name: "RetryKit"),
        .target(name: "RetryKitHTTP", dependencies: ["RetryKit"]),
        .target(name: "RetryKitTesting", dependencies: ["RetryKit"]),
        .executableTarget(
            name: "retrykit-demo", dependencies: ["RetryKit", "RetryKitHTTP", "RetryKitTesting"],
            path: "Sources/RetryKitDemo"),
        // Seeded property-testing support shared by the test targets (not a product).
        .target(name: "PropertyTesting", path: "Tests/PropertyTesting"),
        .testTarget(name: "RetryKitTests", dependencies: ["RetryKit", "RetryKitTesting", "PropertyTesting"]),
        .testTarget(name: "RetryKitHTTPTests", dependencies: ["RetryKitHTTP", "RetryKitTesting", "PropertyTesting"]),
        .testTarget(name: "DemoTests", dependencies: ["retrykit-demo", "RetryKitTesting"]),
        // The code blocks of Migration.md, README.md and the DocC articles, extracted by scripts/check-snippets.py.
        .testTarget(
            name: "MigrationSnippets", dependencies: ["RetryKit", "RetryKitHTTP", "RetryKitTesting"],
            path: "Tests/MigrationSnippets"),
    ]
)
