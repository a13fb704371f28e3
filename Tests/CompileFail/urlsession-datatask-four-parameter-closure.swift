// expect-error: expects 3 arguments, but 4 were used in closure body
// Foundation's `dataTask(with:completionHandler:)` with one closure parameter too many. Before, this silently
// retried with a default `HTTPRetryPolicy`; a retrying call must name `retryPolicy:`.
import Foundation
import RetryKitHTTP

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

func load(_ session: URLSession, _ request: URLRequest) {
    let task = session.dataTask(with: request) { data, response, error, summary in
        print(data as Any, response as Any, error as Any, summary)
    }
    task.resume()
}
