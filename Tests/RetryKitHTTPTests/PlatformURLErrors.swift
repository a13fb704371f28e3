import Foundation
import RetryKitHTTP

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The `URLError` codes URLSession reports for a transport failure, where the platforms differ.
///
/// Linux's URLSession (swift-corelibs-foundation, on libcurl) and Apple's (CFNetwork) do not always pick the same code
/// for the same event on the wire. Tests assert the exact code on the platform it was observed on, and on the other
/// only that it is one of the codes that platform is known to report for that event. Either way the code must be one
/// that `HTTPRetryPolicy` retries by default, which is the property RetryKit depends on.
enum TransportErrorCodes {
    #if canImport(FoundationNetworking)
        /// The server closes the connection without sending a byte of a response.
        static let closedWithoutReply: Set<URLError.Code> = [.badServerResponse]
    #else
        /// The server closes the connection without sending a byte of a response: CFNetwork reports the connection
        /// as lost (and may report a bad response if the close races with the request's last bytes).
        static let closedWithoutReply: Set<URLError.Code> = [.networkConnectionLost, .badServerResponse]
    #endif

    /// The codes URLSession reports when the server resets the connection before replying.
    static let reset: Set<URLError.Code> = [.networkConnectionLost]
}

/// How many requests a server sees for client attempts that each ended with the connection closed or reset before a
/// reply, where the platforms differ.
///
/// Linux's URLSession (libcurl) sends each attempt once. Apple's may resend an idempotent request once, on its own,
/// when the connection is lost before the response: an attempt can reach the server twice, and a request scripted
/// to fail once may then succeed without the client seeing the failure.
enum ClosedConnectionRequests {
    #if canImport(FoundationNetworking)
        /// Whether URLSession may resend a request on a connection lost before the reply.
        static let mayResend = false
    #else
        static let mayResend = true
    #endif

    /// The requests the server may see for `attempts` such attempts.
    static func range(attempts: Int) -> ClosedRange<Int> {
        mayResend ? attempts...(2 * attempts) : attempts...attempts
    }
}
