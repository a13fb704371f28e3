import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What went wrong below HTTP when an attempt got no response: the classification of a transport error that
/// ``HTTPRetryPolicy`` decides from, whatever the HTTP client.
///
/// The names are those of the `URLError` codes (`timedOut`, `cannotConnectToHost`, …), so URLSession's errors map one
/// to one (`TransportFailure(code)`, ``init(classifying:)``), and Alamofire's default retry list reads the same.
/// Other clients classify their own errors into these names: AsyncHTTPClient's connect timeout is ``timedOut``, a
/// refused connection ``cannotConnectToHost``, a connection closed mid-request ``networkConnectionLost``. A failure
/// without a constant is a string: `"connectionReset"`, or `TransportFailure(rawValue: name)`.
public struct TransportFailure: StringToken {
    /// The failure's name, for example `"timedOut"`.
    public let rawValue: String

    /// A failure from its name, used exactly as given.
    public init(rawValue: String) {
        self.rawValue = rawValue
    }

    /// The failure a `URLError` code stands for: the constant of the same name, or `"URLError(<code>)"` for a code
    /// without one.
    public init(_ code: URLError.Code) {
        self = Self.byURLErrorCode[code] ?? TransportFailure(rawValue: "URLError(\(code.rawValue))")
    }

    /// The failure `error` stands for, or `nil` if it is not a transport error: a `URLError` (or an `NSError` in
    /// `NSURLErrorDomain`) by its code, `CancellationError` as ``cancelled``, and a RetryKit attempt timeout
    /// (`RetryError.Reason.attemptTimedOut`) as ``timedOut``.
    ///
    /// The classification URLSession support uses, and the default for other clients whose errors are `URLError`s.
    public init?(classifying error: any Error) {
        if let urlError = error as? URLError {
            self.init(urlError.code)
            return
        }
        if let retryError = error as? RetryError {
            guard retryError.reason == .attemptTimedOut else { return nil }
            self = .timedOut
            return
        }
        if error is CancellationError {
            self = .cancelled
            return
        }
        if error is HTTPStatusError { return nil }
        let nsError = error as NSError
        guard nsError.domain == NSURLErrorDomain else { return nil }
        // Failable in swift-corelibs-foundation, not on Apple platforms.
        let code: URLError.Code? = URLError.Code(rawValue: nsError.code)
        self = code.map { TransportFailure($0) } ?? TransportFailure(rawValue: "URLError(\(nsError.code))")
    }

    /// The attempt was cancelled by the client. Never retried.
    public static let cancelled: TransportFailure = "cancelled"
    /// No answer in time. What RetryKit's own attempt timeout counts as, and what a `RetryBudget` charges its
    /// `timeoutRetryCost` for.
    public static let timedOut: TransportFailure = "timedOut"
    /// The host refused the connection or could not be reached.
    public static let cannotConnectToHost: TransportFailure = "cannotConnectToHost"
    /// The host name could not be resolved.
    public static let cannotFindHost: TransportFailure = "cannotFindHost"
    /// The DNS lookup failed.
    public static let dnsLookupFailed: TransportFailure = "dnsLookupFailed"
    /// The connection dropped during the request.
    public static let networkConnectionLost: TransportFailure = "networkConnectionLost"
    /// The device is offline.
    public static let notConnectedToInternet: TransportFailure = "notConnectedToInternet"
    /// The TLS handshake failed.
    public static let secureConnectionFailed: TransportFailure = "secureConnectionFailed"
    /// The reply was missing or garbled.
    public static let badServerResponse: TransportFailure = "badServerResponse"
    /// The reply could not be parsed.
    public static let cannotParseResponse: TransportFailure = "cannotParseResponse"
    /// The server's certificate has expired (or the device clock is wrong).
    public static let serverCertificateHasBadDate: TransportFailure = "serverCertificateHasBadDate"
    /// The server's certificate is not valid yet (or the device clock is wrong).
    public static let serverCertificateNotYetValid: TransportFailure = "serverCertificateNotYetValid"
    /// The server's certificate is not trusted.
    public static let serverCertificateUntrusted: TransportFailure = "serverCertificateUntrusted"
    /// Another process uses the background session.
    public static let backgroundSessionInUseByAnotherProcess: TransportFailure =
        "backgroundSessionInUseByAnotherProcess"
    /// The app was suspended during a background transfer.
    public static let backgroundSessionWasDisconnected: TransportFailure = "backgroundSessionWasDisconnected"
    /// A phone call blocks data on this network.
    public static let callIsActive: TransportFailure = "callIsActive"
    /// A cache-only load missed the cache.
    public static let cannotLoadFromNetwork: TransportFailure = "cannotLoadFromNetwork"
    /// Cellular data is switched off.
    public static let dataNotAllowed: TransportFailure = "dataNotAllowed"
    /// An encoded download broke off.
    public static let downloadDecodingFailedMidStream: TransportFailure = "downloadDecodingFailedMidStream"
    /// An encoded download could not be decoded at its end.
    public static let downloadDecodingFailedToComplete: TransportFailure = "downloadDecodingFailedToComplete"
    /// Roaming data is switched off.
    public static let internationalRoamingOff: TransportFailure = "internationalRoamingOff"

    private static let byURLErrorCode: [URLError.Code: TransportFailure] = [
        .cancelled: .cancelled, .timedOut: .timedOut, .cannotConnectToHost: .cannotConnectToHost,
        .cannotFindHost: .cannotFindHost, .dnsLookupFailed: .dnsLookupFailed,
        .networkConnectionLost: .networkConnectionLost, .notConnectedToInternet: .notConnectedToInternet,
        .secureConnectionFailed: .secureConnectionFailed, .badServerResponse: .badServerResponse,
        .cannotParseResponse: .cannotParseResponse, .serverCertificateHasBadDate: .serverCertificateHasBadDate,
        .serverCertificateNotYetValid: .serverCertificateNotYetValid,
        .serverCertificateUntrusted: .serverCertificateUntrusted,
        .backgroundSessionInUseByAnotherProcess: .backgroundSessionInUseByAnotherProcess,
        .backgroundSessionWasDisconnected: .backgroundSessionWasDisconnected, .callIsActive: .callIsActive,
        .cannotLoadFromNetwork: .cannotLoadFromNetwork, .dataNotAllowed: .dataNotAllowed,
        .downloadDecodingFailedMidStream: .downloadDecodingFailedMidStream,
        .downloadDecodingFailedToComplete: .downloadDecodingFailedToComplete,
        .internationalRoamingOff: .internationalRoamingOff,
    ]
}
