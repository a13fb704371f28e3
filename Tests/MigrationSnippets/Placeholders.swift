// Placeholders for the code that the documentation's fragments talk about: "your" model types and APIs. Only the
// names and signatures matter. A block that uses them says so on its first line of code (`// Fragment: …`);
// `scripts/check-snippets.py --typecheck` compiles such a block with this file and nothing else but its own imports,
// every other block on its own. This file must not use anything that RetryKit does not make public. The parts of
// Alamofire that the "before" code uses are a module of their own, Tests/AlamofireStandIn.

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

/// The API the fragments call.
let api: any ProfileAPI = PlaceholderProfileAPI()

/// A ``ProfileAPI`` that answers at once.
struct PlaceholderProfileAPI: ProfileAPI {
    func load(id: Int, completion: @escaping @Sendable (Profile?, (any Error)?) -> Void) {
        completion(Profile(id: id, name: "Ada"), nil)
    }

    func profile(id: Int) async throws -> Profile {
        Profile(id: id, name: "Ada")
    }
}

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

// MARK: - Your code with a login

/// An error of your API.
enum APIError: Error {
    case unauthorized
    case other

    /// Whether the server rejected the credential.
    var isUnauthorized: Bool { self == .unauthorized }
}

extension ProfileAPI {
    /// Makes a new token from the current one; calls `completion` once, on any thread.
    func refreshToken(_ current: String?, completion: @escaping @Sendable (String?, (any Error)?) -> Void) {
        completion("new-token", nil)
    }

    /// Loads a profile with a token; calls `completion` once, on any thread.
    func load(id: Int, token: String, completion: @escaping @Sendable (Profile?, (any Error)?) -> Void) {
        completion(Profile(id: id, name: "Ada"), nil)
    }
}

/// An OAuth token as an app keeps it (Migration.md, "From Alamofire's AuthenticationInterceptor").
struct OAuthToken: Sendable, Equatable {
    var accessToken: String
    var refreshToken: String
    var expiration: Date

    /// Whether it expires within five minutes: refresh it before use.
    var requiresRefresh: Bool { Date(timeIntervalSinceNow: 5 * 60) > expiration }
}

/// The app's token endpoint, in both styles.
protocol TokenService: Sendable {
    /// Calls `completion` once, on any thread, with a new token for `refreshToken`.
    func refresh(_ refreshToken: String, completion: @escaping @Sendable (Result<OAuthToken, any Error>) -> Void)
    /// The async version of the same call.
    func refreshed(_ refreshToken: String) async throws -> OAuthToken
}

/// The token endpoint the fragments call.
let tokenService: any TokenService = PlaceholderTokenService()

/// The token the app stored at its last login, if any.
let storedToken: OAuthToken? = OAuthToken(accessToken: "a1", refreshToken: "r1", expiration: .distantFuture)

/// A ``TokenService`` that answers at once.
struct PlaceholderTokenService: TokenService {
    func refresh(_ refreshToken: String, completion: @escaping @Sendable (Result<OAuthToken, any Error>) -> Void) {
        completion(.success(OAuthToken(accessToken: "a2", refreshToken: refreshToken, expiration: .distantFuture)))
    }

    func refreshed(_ refreshToken: String) async throws -> OAuthToken {
        OAuthToken(accessToken: "a2", refreshToken: refreshToken, expiration: .distantFuture)
    }
}
