// expect-error: expects 2 arguments, which cannot be implicitly ignored
// A completion that takes no parameter does not match the one completion shape, `(Result, RetrySummary)`: rejected,
// instead of the summary (or the result) being dropped silently.
import Dispatch
import RetryKit

func load(queue: DispatchQueue) {
    retry(on: queue) { _, done in
        done(.success(1))
    } completion: {
        print("finished")
    }
}
