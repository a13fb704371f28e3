// Alamofire's names in a file that imports RetryKit's three modules beside Tests/AlamofireStandIn (issue 27, point 4).
// A type name that two imported modules declare is ambiguous where a type is expected, but an expression such as
// `RetryPolicy(retryLimit: 3)` may still compile, picking the initializer that fits; so each name is written here as
// a type, and a RetryKit type named like one of them fails this file. scripts/check-name-clashes.py checks every
// public type name of the real package (and of the other packages users import beside RetryKit).

import AlamofireStandIn
import Foundation
import RetryKit
import RetryKitHTTP
import RetryKitTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Every public type of the stand-in, where a type is expected.
private struct AlamofireTypes {
    var url: (any URLConvertible)?
    var method: HTTPMethod?
    var error: AFError?
    var response: DataResponse<Int, AFError>?
    var afResponse: AFDataResponse<Int>?
    var request: Request?
    var dataRequest: DataRequest?
    var result: RetryResult?
    var adapter: (any RequestAdapter)?
    var retrier: (any RequestRetrier)?
    var interceptor: (any RequestInterceptor)?
    var policy: RetryPolicy?
    var session: Session?
    var credential: (any AuthenticationCredential)?
    var authenticationError: AuthenticationError?
    var window: AuthenticationInterceptor<StandInAuthenticator>.RefreshWindow?
    var authenticationInterceptor: AuthenticationInterceptor<StandInAuthenticator>?
}

/// An `Authenticator`, where a type is expected.
private final class StandInAuthenticator: Authenticator {
    struct Token: AuthenticationCredential, Sendable {
        var requiresRefresh: Bool { false }
    }

    func apply(_ credential: Token, to urlRequest: inout URLRequest) {}
    func refresh(
        _ credential: Token, for session: Session, completion: @escaping @Sendable (Result<Token, any Error>) -> Void
    ) { completion(.success(credential)) }
    func didRequest(
        _ urlRequest: URLRequest, with response: HTTPURLResponse, failDueToAuthenticationError error: any Error
    ) -> Bool { response.statusCode == 401 }
    func isRequest(_ urlRequest: URLRequest, authenticatedWith credential: Token) -> Bool { true }
}

@Test("Alamofire's type names resolve beside RetryKit's: no RetryKit type is named like one of them")
func alamofireTypeNamesResolve() {
    let policy: RetryPolicy = RetryPolicy(retryLimit: 3)
    let session: Session = Session(interceptor: policy)
    let types = AlamofireTypes(interceptor: policy, policy: policy, session: session)
    // RetryKit's own names, in the same file.
    let plan: RetryPlan = .exponentialBackoff().giveUpAfter(maxAttempts: 4)
    let http: HTTPRetryPolicy = HTTPRetryPolicy(retryLimit: policy.retryLimit)
    #expect(types.policy?.retryLimit == 3)
    #expect(http.maxAttempts == 4)
    _ = plan
}
