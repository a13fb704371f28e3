import Dispatch
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The serial queues RetryKit calls URLSession from: creating, resuming and cancelling the data tasks of attempts.
///
/// On Linux, `dataTask(with:completionHandler:)`, `resume()` and `cancel()` of swift-corelibs-foundation wait on the
/// session's internal serial queue, which is busy while libcurl works; under load a call can block its thread for
/// seconds. Called from a new queue per request on the global pool, every waiting call holds a Dispatch worker, so a
/// thousand requests block a dozen workers at once and starve the rest of the process (Swift concurrency included).
/// Made here, the calls of one session wait in one queue, and RetryKit blocks at most ``count`` threads at a time,
/// however many requests run. No completion and no cancellation that RetryKit reports waits for these calls: a
/// cancelled request completes first, and its data task is cancelled here afterwards.
///
/// A session always maps to the same queue, so the calls for one data task run in the order they were made (it is
/// created and resumed before it is cancelled).
enum URLSessionCalls {
    /// How many queues there are: the most threads RetryKit's URLSession calls can occupy at once.
    static let count = 4

    private static let queues: [DispatchQueue] = (0..<count).map { index in
        DispatchQueue(label: "org.retrykit.http.urlsession-calls.\(index)")
    }

    /// The queue for the calls on `session`'s tasks.
    static func queue(for session: URLSession) -> DispatchQueue {
        // The address of a live object is at least 16-byte aligned: drop the low bits that never vary.
        let address = UInt(bitPattern: ObjectIdentifier(session))
        return queues[Int((address >> 4) % UInt(count))]
    }
}
