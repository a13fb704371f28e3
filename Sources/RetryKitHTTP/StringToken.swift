/// A value that is one string token, used exactly as written: the shape ``HTTPRequestMethod`` and ``TransportFailure``
/// share.
///
/// A conforming type stores its token as `rawValue` and gets the rest from here: creation from a string literal and
/// the token as its description. Equality and hashing compare the token as it is, case included (the standard library's
/// defaults for a `RawRepresentable` type with a `Hashable` raw value).
protocol StringToken: RawRepresentable, Hashable, Sendable, ExpressibleByStringLiteral, CustomStringConvertible
where RawValue == String {
    /// A token used exactly as given.
    init(rawValue: String)
}

extension StringToken {
    /// The token `value`, used exactly as written.
    public init(stringLiteral value: String) {
        self.init(rawValue: value)
    }

    /// The token itself.
    public var description: String { rawValue }
}
