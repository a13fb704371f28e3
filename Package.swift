// swift-tools-version: 6.2
// RetryKit has no package dependencies. Benchmark tooling lives in the nested package `Benchmarks/`.
//
// Why 6.2, the oldest toolchain RetryKit supports: the library itself uses Swift 6.0 language features only (typed
// throws, `sending`, `#isolation`, `package` access) and this manifest 6.0 APIs only, but `swift test` needs 6.2
// (`weak let`, SE-0481, in the HTTP tests; Swift Testing's `#expect(throws:)` returning the error needs 6.1), and 6.2
// is the oldest toolchain CI builds with: Xcode 26 in .github/workflows/apple.yml, Swift 6.3.1 on Linux. A 6.0 or 6.1
// toolchain has never compiled this code, so the manifest does not claim it.
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
        .target(name: "PropertyTesting", dependencies: ["RetryKitTesting"], path: "Tests/PropertyTesting"),
        .testTarget(name: "RetryKitTests", dependencies: ["RetryKit", "RetryKitTesting", "PropertyTesting"]),
        .testTarget(name: "RetryKitHTTPTests", dependencies: ["RetryKitHTTP", "RetryKitTesting", "PropertyTesting"]),
        .testTarget(name: "DemoTests", dependencies: ["retrykit-demo", "RetryKitTesting"]),
        // The code blocks of Migration.md, README.md and the DocC articles, extracted by scripts/check-snippets.py.
        .testTarget(
            name: "MigrationSnippets",
            dependencies: ["RetryKit", "RetryKitHTTP", "RetryKitTesting", "AlamofireStandIn"],
            path: "Tests/MigrationSnippets"),
        // Alamofire's names that Migration.md's "before" code uses, so that it compiles beside RetryKit (not a product).
        .target(name: "AlamofireStandIn", path: "Tests/AlamofireStandIn"),
    ]
)
