import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// How the requests of an ``HTTPRetryPolicy`` authenticate: which responses mean "authentication failed" (401 by
/// default), how a credential is applied to a request, and how it is refreshed, on a shared `RetryRecovery`.
///
/// Give it to a policy with ``HTTPRetryPolicy/authenticated(by:)``. Every HTTP entry point then applies the current
/// credential to each attempt's request, and a response with a status in ``failureStatusCodes`` fails its attempt and
/// is answered by the recovery: one refresh for every request waiting for it (callback and async alike), then each of
/// them retries at once with the new credential.
///
/// ```swift
/// let authenticator = HTTPAuthenticator<Token>(
///     credential: storedToken,
///     apply: { token, request in request.setValue("Bearer \(token.access)", forHTTPHeaderField: "Authorization") },
///     refresh: { token in try await auth.refresh(token) })
/// let policy = HTTPRetryPolicy().authenticated(by: authenticator)
///
/// let (data, response) = try await session.data(for: request, retryPolicy: policy)
/// session.dataTask(with: request, retryPolicy: policy) { data, response, error, summary in … }
/// ```
///
/// Its ``recovery`` is an ordinary `RetryRecovery`: share it with non-HTTP runs of the same credential
/// (`plan.recovering(with: authenticator.recovery)`), or build the authenticator on a recovery you already have with
/// ``init(recovery:failureStatusCodes:apply:)``.
///
/// What the recovery guarantees (one refresh at a time, credentials by generation so that a failure with a credential
/// another request has already replaced retries without a refresh, refresh before use when `requiresRefresh` says so,
/// the `RecoveryWindow`) is `RetryRecovery`'s. A request that fails authentication is retried after the refresh whatever
/// its method (the server rejected it before acting on it); every retry counts against the policy's
/// ``HTTPRetryPolicy/maxAttempts``, but a retry after a refresh waits no backoff and does not pay the policy's budget.
///
/// When the recovery cannot give a credential, the request ends with a `RetryError` in every entry point, never with
/// a response:
///
/// - `RetryError.Reason.recoveryFailed`: the refresh failed; its `lastError` is the refresh's error. Every request
///   waiting for that refresh ends this way.
/// - `RetryError.Reason.recoveryLimitExceeded`: a refresh was needed but the `RecoveryWindow` allows no more now; its
///   `lastError` is the attempt's ``HTTPStatusError`` (the 401), if an attempt ran.
///
/// A 401 on the last attempt the policy allows is not refreshed: the request gives up with that response, as with any
/// failing response.
public struct HTTPAuthenticator<Credential: Sendable>: Sendable {
    /// The recovery that holds the credential and refreshes it. Share it with every run that uses the same credential.
    public let recovery: RetryRecovery<Credential>
    /// The status codes that mean "authentication failed": a response with one fails its attempt and is answered by a
    /// refresh. `[401]` by default.
    public let failureStatusCodes: Set<Int>
    private let applying: @Sendable (Credential, inout URLRequest) -> Void

    /// An authenticator whose refresh calls a completion handler (Alamofire's `refresh(_:for:completion:)` shape).
    ///
    /// - Parameters:
    ///   - credential: The credential to start with; `nil` to refresh before the first request.
    ///   - window: How often it may refresh: `RecoveryWindow()` (5 refreshes in 30 s, Alamofire's `RefreshWindow`) by
    ///     default.
    ///   - failureStatusCodes: The statuses that mean "authentication failed"; `[401]` by default.
    ///   - otherFailures: Other errors that mean the credential failed (for non-HTTP runs sharing ``recovery``); none by
    ///     default.
    ///   - requiresRefresh: Whether a credential must be refreshed before use (an expiry known in advance); never by
    ///     default.
    ///   - apply: Puts the credential on a request (an `Authorization` header, say). Called for every attempt, on the
    ///     queue or task that starts it; keep it quick and pure.
    ///   - refresh: Makes a new credential from the current one (`nil` if there is none) and calls its completion once,
    ///     from any thread. It runs on the queue of the request that needed it (see `RetryRecovery`), never under a
    ///     RetryKit lock.
    public init(
        credential: Credential? = nil,
        window: RecoveryWindow = RecoveryWindow(),
        failureStatusCodes: Set<Int> = [401],
        otherFailures: @escaping @Sendable (any Error) -> Bool = { _ in false },
        requiresRefresh: (@Sendable (Credential) -> Bool)? = nil,
        apply: @escaping @Sendable (_ credential: Credential, _ request: inout URLRequest) -> Void,
        refresh:
            @escaping @Sendable (
                _ current: Credential?, _ completion: @escaping @Sendable (Result<Credential, any Error>) -> Void
            ) -> Void
    ) {
        let recovery = RetryRecovery<Credential>(
            credential: credential, window: window,
            when: { Self.isAuthenticationFailure($0, statusCodes: failureStatusCodes) || otherFailures($0) },
            requiresRefresh: requiresRefresh, refresh: refresh)
        self.init(recovery: recovery, failureStatusCodes: failureStatusCodes, apply: apply)
    }

    /// An authenticator whose refresh is an `async` function, run in a new `Task`.
    ///
    /// - Parameters:
    ///   - credential: The credential to start with; `nil` to refresh before the first request.
    ///   - window: How often it may refresh: `RecoveryWindow()` (5 refreshes in 30 s) by default.
    ///   - failureStatusCodes: The statuses that mean "authentication failed"; `[401]` by default.
    ///   - otherFailures: Other errors that mean the credential failed (for non-HTTP runs sharing ``recovery``); none by
    ///     default.
    ///   - requiresRefresh: Whether a credential must be refreshed before use; never by default.
    ///   - apply: Puts the credential on a request. Called for every attempt; keep it quick and pure.
    ///   - refresh: Makes a new credential from the current one (`nil` if there is none), or throws.
    public init(
        credential: Credential? = nil,
        window: RecoveryWindow = RecoveryWindow(),
        failureStatusCodes: Set<Int> = [401],
        otherFailures: @escaping @Sendable (any Error) -> Bool = { _ in false },
        requiresRefresh: (@Sendable (Credential) -> Bool)? = nil,
        apply: @escaping @Sendable (_ credential: Credential, _ request: inout URLRequest) -> Void,
        refresh: @escaping @Sendable (_ current: Credential?) async throws -> Credential
    ) {
        let recovery = RetryRecovery<Credential>(
            credential: credential, window: window,
            when: { Self.isAuthenticationFailure($0, statusCodes: failureStatusCodes) || otherFailures($0) },
            requiresRefresh: requiresRefresh, refresh: refresh)
        self.init(recovery: recovery, failureStatusCodes: failureStatusCodes, apply: apply)
    }

    /// An authenticator on a recovery you already have (shared with non-HTTP runs, say).
    ///
    /// The recovery's `when:` predicate decides which failures it answers: make it recognise the HTTP failures too,
    /// with ``isAuthenticationFailure(_:statusCodes:)``. A response in `failureStatusCodes` that it does not recognise
    /// goes to the policy, which does not retry a 401: the request ends with that response.
    ///
    /// ```swift
    /// let session = RetryRecovery<Token>(
    ///     credential: storedToken,
    ///     when: { HTTPAuthenticator<Token>.isAuthenticationFailure($0) || ($0 as? RPCError)?.isUnauthenticated == true },
    ///     refresh: { token in try await auth.refresh(token) })
    /// let authenticator = HTTPAuthenticator(recovery: session) { token, request in
    ///     request.setValue("Bearer \(token.access)", forHTTPHeaderField: "Authorization")
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - recovery: The recovery to share.
    ///   - failureStatusCodes: The statuses that fail their attempt so that the recovery can see them; `[401]` by
    ///     default.
    ///   - apply: Puts the credential on a request. Called for every attempt; keep it quick and pure.
    public init(
        recovery: RetryRecovery<Credential>,
        failureStatusCodes: Set<Int> = [401],
        apply: @escaping @Sendable (_ credential: Credential, _ request: inout URLRequest) -> Void
    ) {
        self.recovery = recovery
        self.failureStatusCodes = failureStatusCodes
        self.applying = apply
    }

    /// Whether `error` is a response that failed authentication: an ``HTTPStatusError`` with a status in
    /// `statusCodes`.
    ///
    /// - Parameters:
    ///   - error: An attempt's error.
    ///   - statusCodes: The statuses that mean "authentication failed"; `[401]` by default.
    public static func isAuthenticationFailure(_ error: any Error, statusCodes: Set<Int> = [401]) -> Bool {
        guard let status = error as? HTTPStatusError else { return false }
        return statusCodes.contains(status.statusCode)
    }

    /// `request` with `credential` applied, as every attempt sends it.
    ///
    /// - Parameters:
    ///   - credential: The credential to apply.
    ///   - request: The request as the caller made it.
    /// - Returns: The request with the credential.
    public func apply(_ credential: Credential, to request: URLRequest) -> URLRequest {
        var request = request
        applying(credential, &request)
        return request
    }

    /// The authenticator with its credential's type erased, as a policy stores it.
    var erased: HTTPAuthentication {
        let applying = self.applying
        return HTTPAuthentication(
            recovery: recovery.core, failureStatusCodes: failureStatusCodes,
            apply: { credential, request in
                // Always a `Credential`: the recovery only ever holds this authenticator's credentials.
                guard let credential = credential as? Credential else { return }
                applying(credential, &request)
            })
    }
}

/// An ``HTTPAuthenticator`` with its credential's type erased: what an ``HTTPRetryPolicy`` stores.
struct HTTPAuthentication: Sendable {
    let recovery: RecoveryCore
    let failureStatusCodes: Set<Int>
    let apply: @Sendable (_ credential: any Sendable, _ request: inout URLRequest) -> Void

    /// `request` with the credential of the attempt applied; unchanged without one.
    func applied(_ credential: (any Sendable)?, to request: URLRequest) -> URLRequest {
        guard let credential else { return request }
        var request = request
        apply(credential, &request)
        return request
    }
}

extension HTTPRetryPolicy {
    /// A copy whose requests authenticate with `authenticator`: every attempt's request carries its current credential,
    /// and a response in its ``HTTPAuthenticator/failureStatusCodes`` fails the attempt and is answered by a refresh
    /// (one for every request waiting for it), then a retry at once with the new credential.
    ///
    /// ```swift
    /// let policy = HTTPRetryPolicy().authenticated(by: authenticator)
    /// let (data, response) = try await session.data(for: request, retryPolicy: policy)
    /// ```
    ///
    /// All entry points apply it: URLSession's `dataTask(with:retryPolicy:…)` and `data(for:retryPolicy:…)`, and
    /// ``run(authenticatedBy:method:url:requestHeader:statusCode:responseHeader:classify:isolation:observer:operation:)``
    /// for other clients. A later call replaces an earlier authenticator.
    ///
    /// - Parameter authenticator: How requests authenticate and how the credential is refreshed.
    /// - Returns: The policy with `authenticator`.
    public func authenticated<Credential>(by authenticator: HTTPAuthenticator<Credential>) -> HTTPRetryPolicy {
        var copy = self
        copy.authentication = authenticator.erased
        return copy
    }

    /// Whether the policy has an authenticator (``authenticated(by:)``).
    public var isAuthenticated: Bool { authentication != nil }
}
