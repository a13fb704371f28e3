/// An error with an identity, so tests can tell which attempt's error a retrier finished with.
struct TestError: Error, Equatable, CustomStringConvertible {
    let id: Int

    init(_ id: Int) {
        self.id = id
    }

    var description: String { "TestError(\(id))" }
}
