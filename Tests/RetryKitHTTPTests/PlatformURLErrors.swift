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
}
