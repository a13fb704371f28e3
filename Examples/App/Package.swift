// swift-tools-version: 6.2
// App code as RetryKit's users write it: a main-actor view model with a plain-class legacy client, using every
// completion-handler entry point and the bridges. The same sources compile in both isolation modes of Swift 6:
//
//     swift build && swift test                                          # default isolation (explicit @MainActor)
//     RETRYKIT_APP_ISOLATION=main swift test --scratch-path .build-main  # Xcode 26's defaults for a new app target
//
// CI builds and tests both (.ci/run).
import PackageDescription

/// Xcode 26's settings for a new app target, as SwiftPM spells them: unannotated code is main-actor isolated,
/// nonisolated async functions run on the caller's actor, conformances may be isolated.
let xcode26Defaults: [SwiftSetting] = [
    .defaultIsolation(MainActor.self),
    .enableUpcomingFeature("NonisolatedNonsendingByDefault"),
    .enableUpcomingFeature("InferIsolatedConformances"),
]
let settings = Context.environment["RETRYKIT_APP_ISOLATION"] == "main" ? xcode26Defaults : []

let package = Package(
    name: "ItemsApp",
    platforms: [.macOS(.v13), .iOS(.v16)],
    dependencies: [.package(name: "RetryKit", path: "../..")],
    targets: [
        .target(
            name: "ItemsApp",
            dependencies: [
                .product(name: "RetryKit", package: "RetryKit"),
                .product(name: "RetryKitHTTP", package: "RetryKit"),
            ],
            swiftSettings: settings),
        .testTarget(
            name: "ItemsAppTests",
            dependencies: ["ItemsApp", .product(name: "RetryKitTesting", package: "RetryKit")],
            swiftSettings: settings),
    ]
)
