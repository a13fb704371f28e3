extension Duration {
    /// This duration in seconds as a `Double`, for statistics and tolerance checks in tests.
    var inSeconds: Double {
        Double(components.seconds) + Double(components.attoseconds) * 1e-18
    }
}
