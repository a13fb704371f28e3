// swift-tools-version: 6.0
// Examples of RetryKit with other libraries: an AsyncHTTPClient adapter for HTTPRetryPolicy, and swift-log and
// swift-metrics fed from RetryKit's events. A separate package, so that RetryKit itself keeps zero dependencies.
//
//     swift run retrykit-examples    # checks every example against a loopback ScriptedHTTPServer
import PackageDescription

let package = Package(
    name: "RetryKitExamples",
    platforms: [.macOS(.v13)],
    dependencies: [
        .package(name: "RetryKit", path: ".."),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
    ],
    targets: [
        .executableTarget(
            name: "retrykit-examples",
            dependencies: [
                .product(name: "RetryKit", package: "RetryKit"),
                .product(name: "RetryKitHTTP", package: "RetryKit"),
                .product(name: "RetryKitTesting", package: "RetryKit"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ],
            path: "Sources/RetryKitExamples"
        )
    ]
)
