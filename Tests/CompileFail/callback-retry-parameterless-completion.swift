// expect-error: expects 2 arguments, which cannot be implicitly ignored
// A completion that takes no parameter matches neither completion shape (`(Result)` or `(Result, RetrySummary)`):
// rejected, instead of one of them being picked silently.
import Dispatch
import RetryKit

func load(queue: DispatchQueue) {
    retry(on: queue) { _, done in
        done(.success(1))
    } completion: {
        print("finished")
    }
}
