// Placeholders for the code the documentation's snippets talk about: "your" model types and APIs, and the parts of
// Alamofire that the "before" code uses. Only the names and signatures matter; the snippets that run use the fakes at
// the bottom. The snippets themselves live in the Markdown and are copied into Generated*.swift by
// scripts/check-snippets.py.

import Dispatch
import Foundation
import RetryKit
import RetryKitHTTP

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// MARK: - Your code

/// A model value.
struct Profile: Codable, Sendable, Equatable {
    var id: Int
    var name: String
}

/// A legacy API in the completion-handler style, and the same API once it has an async version.
protocol ProfileAPI: Sendable {
    /// Calls `completion` once, on any thread.
    func load(id: Int, completion: @escaping @Sendable (Profile?, (any Error)?) -> Void)
    /// The async version of the same call.
    func profile(id: Int) async throws -> Profile
}

/// The API the snippets that are only compiled call.
let api: any ProfileAPI = FlakyProfileAPI(failures: 0)

/// Where the snippets that are only compiled send requests.
let profileURL = URL(string: "https://api.example.com/profiles/42") ?? URL(fileURLWithPath: "/")

/// Shows a value to the user.
func show<T>(_ value: T) {
    _ = value
}

/// Writes a line to the log.
func log(_ message: String) {
    _ = message
}

// MARK: - Helpers the snippets use

/// A thread-safe list that `@Sendable` closures (observers, completions) can append to.
final class Recorder<Element: Sendable>: Sendable {
    private let storage = Locked<[Element]>([])

    func append(_ element: Element) {
        storage.withLock { $0.append(element) }
    }

    var values: [Element] { storage.withLock { $0 } }
}

/// An error the fakes fail with.
struct ServerBusy: Error, Equatable {}

/// A fake ``ProfileAPI`` that fails its first `failures` calls (in both styles together) with ``ServerBusy``.
final class FlakyProfileAPI: ProfileAPI {
    private let calls = Locked(0)
    private let failures: Int

    init(failures: Int) {
        self.failures = failures
    }

    /// How many calls were made.
    var callCount: Int { calls.withLock { $0 } }

    private func next(id: Int) -> Result<Profile, any Error> {
        let call = calls.withLock { count in
            count += 1
            return count
        }
        return call <= failures ? .failure(ServerBusy()) : .success(Profile(id: id, name: "Ada"))
    }

    func load(id: Int, completion: @escaping @Sendable (Profile?, (any Error)?) -> Void) {
        let result = next(id: id)
        DispatchQueue.global().async {
            switch result {
            case .success(let profile): completion(profile, nil)
            case .failure(let error): completion(nil, error)
            }
        }
    }

    func profile(id: Int) async throws -> Profile {
        try next(id: id).get()
    }
}

// MARK: - Alamofire, as far as the "before" code uses it

/// The few Alamofire names the migration guide's "before" code uses, with Alamofire's signatures. Snippets marked
/// `in:Alamofire` are compiled inside this namespace, so `RetryPolicy` and `Session` mean these. Nothing here runs.
enum Alamofire {
    final class RetryPolicy: Sendable {
        init(
            retryLimit: UInt = 2,
            exponentialBackoffBase: UInt = 2,
            exponentialBackoffScale: Double = 0.5,
            retryableHTTPMethods: Set<HTTPMethod> = HTTPRetryPolicy.defaultRetryableHTTPMethods,
            retryableHTTPStatusCodes: Set<Int> = HTTPRetryPolicy.defaultRetryableHTTPStatusCodes,
            retryableURLErrorCodes: Set<URLError.Code> = []
        ) {}
    }

    final class Session: Sendable {
        init(interceptor: RetryPolicy? = nil) {}

        func request(_ url: String, method: HTTPMethod = .get) -> DataRequest {
            DataRequest()
        }
    }

    struct AFError: Error {}

    struct DataResponse<Success> {
        let result: Result<Success, AFError>
    }

    final class DataRequest: Sendable {
        func validate() -> Self {
            self
        }

        @discardableResult
        func responseDecodable<T: Decodable>(
            of type: T.Type, completionHandler: @escaping @Sendable (DataResponse<T>) -> Void
        ) -> Self {
            self
        }
    }
}
