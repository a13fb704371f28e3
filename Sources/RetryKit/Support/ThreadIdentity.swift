#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The identity of the calling thread, as a number: equal for two calls on one thread, different for two threads
/// alive at the same time (a thread's identity may be reused after it exits).
enum ThreadIdentity {
    /// The calling thread's identity (never 0).
    @inline(__always)
    static var current: UInt {
        #if canImport(Glibc)
            return UInt(pthread_self())  // an integer there
        #else
            return UInt(bitPattern: pthread_self())  // a pointer (Darwin, Musl)
        #endif
    }
}
