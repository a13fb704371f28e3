import RetryKit

/// A thread-safe list that `@Sendable` closures can append to: what a test's observer, completion or scripted
/// operation saw, to assert on afterwards.
///
/// Retry observers and completions run on other threads (a `DispatchQueue`, the task that runs the retrier), so a test
/// can't append to a local array from them. Append to a `Recorder` instead and read ``values`` once the retrier has
/// finished:
///
/// ```swift
/// let events = Recorder<String>()
/// let handle = retry(maxAttempts: 3, on: queue) { … } observer: { event in
///     events.append("\(event)")
/// }
/// _ = try await handle.value
/// #expect(events.values.count == 1)
/// ```
public final class Recorder<Element: Sendable>: Sendable {
    private let storage = Locked<[Element]>([])

    /// An empty recorder.
    public init() {}

    /// Appends `element`. Safe to call from any thread.
    public func append(_ element: Element) {
        storage.withLock { $0.append(element) }
    }

    /// The elements appended so far, in the order of the calls to ``append(_:)``.
    public var values: [Element] {
        storage.withLock { $0 }
    }

    /// The number of elements appended so far.
    package var count: Int {
        storage.withLock { $0.count }
    }
}
