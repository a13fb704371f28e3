// expect-error: missing argument for parameter 'retryPolicy'
// RetryKit's other options (`queue:`, `observer:`) do not stand in for the policy: `retryPolicy:` has no default.
import Dispatch
import Foundation
import RetryKitHTTP

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

func load(_ session: URLSession, _ request: URLRequest, queue: DispatchQueue) {
    session.dataTask(with: request, queue: queue) { data, response, error, summary in
        print(data as Any, response as Any, error as Any, summary)
    }
}
