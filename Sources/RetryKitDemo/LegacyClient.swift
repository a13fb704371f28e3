import Foundation
import RetryKit

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A "legacy" completion-handler API, as found in many codebases: `(Value?, Error?)` on an arbitrary thread.
struct LegacyClient: Sendable {
    let session: URLSession

    /// Fetches `url` and reports its body as text, or an error for transport failures and non-2xx statuses.
    /// Returns the task so callers can cancel it.
    @discardableResult
    func fetchText(_ url: URL, completion: @escaping @Sendable (String?, (any Error)?) -> Void) -> URLSessionDataTask {
        let task = session.dataTask(with: url) { data, response, error in
            if let error {
                completion(nil, error)
            } else if let http = response as? HTTPURLResponse, !(200..<300).contains(http.statusCode) {
                completion(nil, DemoHTTPError(status: http.statusCode))
            } else {
                completion(String(decoding: data ?? Data(), as: UTF8.self), nil)
            }
        }
        task.resume()
        return task
    }

    /// One retry attempt of ``fetchText(_:completion:)``: hands the result to `done`, and cancels the request when
    /// RetryKit abandons the attempt (the retrier is cancelled or the attempt times out).
    func fetchText(_ url: URL, done: AttemptCompletion<String>) {
        let task = fetchText(url) { text, error in done(text, error) }
        done.onCancel { task.cancel() }
    }
}
