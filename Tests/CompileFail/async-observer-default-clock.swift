// expect-error: need an operation that receives its attempt
// Adding `observer:` to a call written for the async retry library on the default clock, with a typed-throws
// strategy, is rejected with what to write instead.
import RetryKit

struct LoadError: Error {}

func load() throws(LoadError) -> Int { 42 }

func addingAnObserverOnTheDefaultClock() async throws -> Int {
    try await retry(maxAttempts: 3) { () throws(LoadError) -> Int in
        try load()
    } strategy: { (_: LoadError) in
        .backoff(.constant(.seconds(1)))
    } observer: { event in
        print(event)
    }
}
