/// An HTTP request method, compared exactly as sent (methods are case-sensitive, RFC 9110 §9.1).
///
/// `URLRequest` itself uppercases the standard methods (`"get"` is sent as `GET`); other methods go out as written.
///
/// Named so as not to clash with the `HTTPMethod` types of Alamofire and NIOHTTP1 (a file may import both); its
/// constants are spelled like theirs, so `[.get, .put]` reads the same after migrating. Expressible as a
/// string literal for methods without a constant:
///
/// ```swift
/// var policy = HTTPRetryPolicy()
/// policy.retryableHTTPMethods.insert("PROPFIND")
/// ```
public struct HTTPRequestMethod: StringToken {
    /// The method token, for example `"GET"`.
    public let rawValue: String

    /// A method from its token, used exactly as given.
    public init(rawValue: String) {
        self.rawValue = rawValue
    }

    /// `CONNECT`: not idempotent.
    public static let connect: HTTPRequestMethod = "CONNECT"
    /// `DELETE`: idempotent.
    public static let delete: HTTPRequestMethod = "DELETE"
    /// `GET`: safe and idempotent.
    public static let get: HTTPRequestMethod = "GET"
    /// `HEAD`: safe and idempotent.
    public static let head: HTTPRequestMethod = "HEAD"
    /// `OPTIONS`: safe and idempotent.
    public static let options: HTTPRequestMethod = "OPTIONS"
    /// `PATCH`: not idempotent (RFC 5789).
    public static let patch: HTTPRequestMethod = "PATCH"
    /// `POST`: not idempotent.
    public static let post: HTTPRequestMethod = "POST"
    /// `PUT`: idempotent.
    public static let put: HTTPRequestMethod = "PUT"
    /// `QUERY`: safe and idempotent (the IETF draft for a safe method with a body).
    public static let query: HTTPRequestMethod = "QUERY"
    /// `TRACE`: safe and idempotent.
    public static let trace: HTTPRequestMethod = "TRACE"

    /// The idempotent methods of RFC 9110 §9.2.2, and `QUERY`.
    static let idempotentMethods: Set<HTTPRequestMethod> = [
        .delete, .get, .head, .options, .put, .query, .trace,
    ]

    /// Whether RFC 9110 §9.2.2 defines the method as idempotent (repeating the request has the same intended effect as
    /// sending it once, so a client may retry it automatically): `DELETE`, `GET`, `HEAD`, `OPTIONS`, `PUT`, `TRACE`,
    /// and `QUERY` as its draft specifies.
    public var isIdempotent: Bool { Self.idempotentMethods.contains(self) }
}
