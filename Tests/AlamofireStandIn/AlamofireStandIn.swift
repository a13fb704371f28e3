// A stand-in for Alamofire, for CI only (not a product): the public names and signatures that Migration.md's "before"
// code uses. scripts/check-snippets.py compiles a snippet's `import Alamofire` as `import AlamofireStandIn`, so the
// Alamofire section compiles in a file that imports this module beside RetryKit, RetryKitHTTP and RetryKitTesting, and
// Tests/MigrationSnippets/AlamofireBesideRetryKit.swift writes each of these names as a type there: a RetryKit type
// named like one of them (as `RetryPolicy` once was) makes it ambiguous and CI fails (issue 27, point 4).
// scripts/check-name-clashes.py checks every name of the real package; this module only has the ones the guide uses.
// Written from Alamofire 5's documented API, with none of its behaviour: nothing here sends a request.

import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// MARK: - Requests

/// A value that names a URL (Alamofire's `URLConvertible`).
public protocol URLConvertible: Sendable {
    /// The URL, or an error when the value is not one.
    func asURL() throws -> URL
}

extension String: URLConvertible {
    public func asURL() throws -> URL {
        guard let url = URL(string: self) else { throw AFError.invalidURL(url: self) }
        return url
    }
}

extension URL: URLConvertible {
    public func asURL() throws -> URL { self }
}

/// An HTTP method (Alamofire's `HTTPMethod`).
public struct HTTPMethod: RawRepresentable, Hashable, Sendable {
    /// `DELETE`.
    public static let delete = HTTPMethod(rawValue: "DELETE")
    /// `GET`.
    public static let get = HTTPMethod(rawValue: "GET")
    /// `HEAD`.
    public static let head = HTTPMethod(rawValue: "HEAD")
    /// `OPTIONS`.
    public static let options = HTTPMethod(rawValue: "OPTIONS")
    /// `PATCH`.
    public static let patch = HTTPMethod(rawValue: "PATCH")
    /// `POST`.
    public static let post = HTTPMethod(rawValue: "POST")
    /// `PUT`.
    public static let put = HTTPMethod(rawValue: "PUT")
    /// `TRACE`.
    public static let trace = HTTPMethod(rawValue: "TRACE")

    /// The method as it is sent.
    public let rawValue: String

    /// A method spelled `rawValue`.
    public init(rawValue: String) {
        self.rawValue = rawValue
    }
}

/// The errors of a request (Alamofire's `AFError`, reduced to two cases).
public enum AFError: Error {
    /// The request was cancelled.
    case explicitlyCancelled
    /// A ``URLConvertible`` that is not a URL.
    case invalidURL(url: any URLConvertible)
}

/// The outcome of a request (Alamofire's `DataResponse`).
public struct DataResponse<Success: Sendable, Failure: Error>: Sendable {
    /// The decoded value, or the error.
    public let result: Result<Success, Failure>
}

/// A response whose errors are ``AFError``s.
public typealias AFDataResponse<Success: Sendable> = DataResponse<Success, AFError>

/// A request in flight (Alamofire's `Request`).
public class Request: @unchecked Sendable {
    // @unchecked: a class open to subclasses cannot be checked; this one and its subclass store nothing.
}

/// A request whose response is loaded into memory (Alamofire's `DataRequest`).
public final class DataRequest: Request, @unchecked Sendable {
    // @unchecked: restated from `Request`; no stored state.
    /// Marks responses outside 200..<300 as failures.
    public func validate() -> Self {
        self
    }

    /// Decodes the response as `type` and calls `completionHandler` with it. The stand-in never calls it.
    @discardableResult
    public func responseDecodable<T: Decodable & Sendable>(
        of type: T.Type = T.self, completionHandler: @escaping @Sendable (AFDataResponse<T>) -> Void
    ) -> Self {
        self
    }
}

// MARK: - Retrying

/// What a ``RequestRetrier`` decides for a failed request (Alamofire's `RetryResult`).
public enum RetryResult: Sendable {
    /// Retry at once.
    case retry
    /// Retry after the given number of seconds.
    case retryWithDelay(TimeInterval)
    /// Do not retry; the request fails with its error.
    case doNotRetry
    /// Do not retry; the request fails with the given error.
    case doNotRetryWithError(any Error)
}

/// Changes a request before it is sent (Alamofire's `RequestAdapter`).
public protocol RequestAdapter: Sendable {}

/// Decides whether a failed request is retried (Alamofire's `RequestRetrier`).
public protocol RequestRetrier: Sendable {
    /// Calls `completion` with the decision for `request`, which failed with `error`.
    func retry(
        _ request: Request, for session: Session, dueTo error: any Error,
        completion: @escaping @Sendable (RetryResult) -> Void)
}

/// An adapter and a retrier in one (Alamofire's `RequestInterceptor`).
public protocol RequestInterceptor: RequestAdapter, RequestRetrier {}

/// Alamofire's retry policy: exponential backoff for idempotent methods, some status codes and some `URLError` codes.
public final class RetryPolicy: RequestInterceptor {
    /// 2.
    public static let defaultRetryLimit: UInt = 2
    /// 2.
    public static let defaultExponentialBackoffBase: UInt = 2
    /// 0.5 seconds.
    public static let defaultExponentialBackoffScale: Double = 0.5
    /// The idempotent methods.
    public static let defaultRetryableHTTPMethods: Set<HTTPMethod> = [.delete, .get, .head, .options, .put, .trace]
    /// 408, 500, 502, 503, 504.
    public static let defaultRetryableHTTPStatusCodes: Set<Int> = [408, 500, 502, 503, 504]

    /// How many times a request is retried.
    public let retryLimit: UInt
    /// The delay before retry `n` is `exponentialBackoffScale · exponentialBackoffBaseⁿ` seconds.
    public let exponentialBackoffBase: UInt
    /// See ``exponentialBackoffBase``.
    public let exponentialBackoffScale: Double
    /// The methods that are retried.
    public let retryableHTTPMethods: Set<HTTPMethod>
    /// The status codes that are retried.
    public let retryableHTTPStatusCodes: Set<Int>
    /// The `URLError` codes that are retried (Alamofire enables 18; the stand-in has none by default).
    public let retryableURLErrorCodes: Set<URLError.Code>

    /// A policy; every parameter defaults to the matching `default…` constant.
    public init(
        retryLimit: UInt = RetryPolicy.defaultRetryLimit,
        exponentialBackoffBase: UInt = RetryPolicy.defaultExponentialBackoffBase,
        exponentialBackoffScale: Double = RetryPolicy.defaultExponentialBackoffScale,
        retryableHTTPMethods: Set<HTTPMethod> = RetryPolicy.defaultRetryableHTTPMethods,
        retryableHTTPStatusCodes: Set<Int> = RetryPolicy.defaultRetryableHTTPStatusCodes,
        retryableURLErrorCodes: Set<URLError.Code> = []
    ) {
        self.retryLimit = retryLimit
        self.exponentialBackoffBase = exponentialBackoffBase
        self.exponentialBackoffScale = exponentialBackoffScale
        self.retryableHTTPMethods = retryableHTTPMethods
        self.retryableHTTPStatusCodes = retryableHTTPStatusCodes
        self.retryableURLErrorCodes = retryableURLErrorCodes
    }

    /// Decides for `request`. The stand-in never retries.
    public func retry(
        _ request: Request, for session: Session, dueTo error: any Error,
        completion: @escaping @Sendable (RetryResult) -> Void
    ) {
        completion(.doNotRetry)
    }
}

// MARK: - Session

/// Creates and runs requests (Alamofire's `Session`).
public final class Session: Sendable {
    /// The interceptor every request of the session goes through.
    public let interceptor: (any RequestInterceptor)?

    /// A session whose requests go through `interceptor`.
    public init(interceptor: (any RequestInterceptor)? = nil) {
        self.interceptor = interceptor
    }

    /// A request for `convertible`. The stand-in never sends it.
    public func request(_ convertible: any URLConvertible, method: HTTPMethod = .get) -> DataRequest {
        DataRequest()
    }
}

// MARK: - Authentication

/// A credential that knows whether it must be refreshed before use (Alamofire's `AuthenticationCredential`).
public protocol AuthenticationCredential {
    /// Whether the credential must be refreshed before it is used (it is known to be expired).
    var requiresRefresh: Bool { get }
}

/// Applies and refreshes a credential for an ``AuthenticationInterceptor`` (Alamofire's `Authenticator`).
public protocol Authenticator: AnyObject, Sendable {
    /// The credential type.
    associatedtype Credential: AuthenticationCredential & Sendable

    /// Puts `credential` on `urlRequest`.
    func apply(_ credential: Credential, to urlRequest: inout URLRequest)
    /// Makes a new credential from `credential` and calls `completion` with it.
    func refresh(
        _ credential: Credential, for session: Session,
        completion: @escaping @Sendable (Result<Credential, any Error>) -> Void)
    /// Whether `response` to `urlRequest` failed because of authentication (typically a 401).
    func didRequest(
        _ urlRequest: URLRequest, with response: HTTPURLResponse, failDueToAuthenticationError error: any Error
    ) -> Bool
    /// Whether `urlRequest` was authenticated with `credential`.
    func isRequest(_ urlRequest: URLRequest, authenticatedWith credential: Credential) -> Bool
}

/// Why an ``AuthenticationInterceptor`` failed a request (Alamofire's `AuthenticationError`).
public enum AuthenticationError: Error {
    /// The interceptor had no credential.
    case missingCredential
    /// More refreshes than the ``AuthenticationInterceptor/RefreshWindow`` allows.
    case excessiveRefresh
}

/// Applies an authenticator's credential to every request and refreshes it once for every request that failed with it
/// (Alamofire's `AuthenticationInterceptor`). The stand-in does nothing.
public final class AuthenticationInterceptor<AuthenticatorType: Authenticator>: RequestInterceptor, @unchecked Sendable
{
    // @unchecked: the stand-in stores only immutable values and a credential nobody mutates.
    /// The credential type of the authenticator.
    public typealias Credential = AuthenticatorType.Credential

    /// At most `maximumAttempts` refreshes within `interval` seconds (30 s, 5 by default).
    public struct RefreshWindow: Sendable {
        /// The span refreshes are counted over, in seconds.
        public let interval: TimeInterval
        /// The most refreshes within ``interval``.
        public let maximumAttempts: Int

        /// A window of `maximumAttempts` refreshes per `interval` seconds.
        public init(interval: TimeInterval = 30.0, maximumAttempts: Int = 5) {
            self.interval = interval
            self.maximumAttempts = maximumAttempts
        }
    }

    /// The credential applied to requests.
    public var credential: Credential?
    /// The authenticator.
    public let authenticator: AuthenticatorType
    /// The refresh window.
    public let refreshWindow: RefreshWindow

    /// An interceptor for `authenticator`, starting with `credential`.
    public init(
        authenticator: AuthenticatorType, credential: Credential? = nil, refreshWindow: RefreshWindow = RefreshWindow()
    ) {
        self.authenticator = authenticator
        self.credential = credential
        self.refreshWindow = refreshWindow
    }

    /// Decides for `request`. The stand-in never retries.
    public func retry(
        _ request: Request, for session: Session, dueTo error: any Error,
        completion: @escaping @Sendable (RetryResult) -> Void
    ) {
        completion(.doNotRetry)
    }
}
