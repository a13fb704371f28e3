import BenchmarkSupport
import Foundation  // log, cos
import RetryKit

/// One run of the optimistic-concurrency workload from the AWS Architecture Blog post "Exponential Backoff And
/// Jitter", in virtual time (a discrete-event simulation: nothing sleeps).
///
/// The model (see Benchmarks/README.md for why each choice was made):
///
/// - One server holds one row with a version number, starting at 0.
/// - Every client starts at time 0 and repeats one *attempt* until a write succeeds:
///   1. it sends a read request (one network hop); the server reads the version;
///   2. the response travels back (one hop) and the client sends its write at once (one hop);
///   3. the server accepts the write if the version is unchanged since the client's read (and increments it), and
///      rejects it otherwise. Every write that reaches the server counts as a *call*;
///   4. the answer travels back (one hop). On success the client is done: the run's *time* is when the last client
///      learns of its success. On failure the client waits the backoff delay, then starts the next attempt.
/// - Every hop is drawn independently as |N(10 ms, 2 ms)|.
/// - The backoff delay comes from RetryKit's public `BackoffStrategy.delay(forRetry:previous:)`, with the 0-based
///   retry index (0 after the first failed write) and the delay it returned last time for this client.
enum Simulation {
    /// What one run measured.
    struct Outcome {
        /// Writes that reached the server.
        var calls: Int
        /// When the last client learned that its write succeeded, in milliseconds of virtual time.
        var milliseconds: Double
    }

    private enum Event {
        /// The client's read request reaches the server.
        case read(client: Int)
        /// The client's write reaches the server.
        case write(client: Int)
        /// The client's backoff is over: it sends its next read request.
        case retry(client: Int)
    }

    private struct Client {
        /// The version the client read in its current attempt.
        var version = 0
        /// Failed writes so far; the next wait uses this as RetryKit's 0-based retry index before incrementing it.
        var failures = 0
        /// The delay chosen before the previous retry (read by decorrelated jitter only).
        var previousDelay: Duration?
    }

    /// The mean and spread of a network hop, in milliseconds.
    static let hopMean = 10.0
    static let hopStandardDeviation = 2.0

    /// Simulates `clientCount` clients until every one has written once.
    ///
    /// - Parameters:
    ///   - clientCount: The number of contending clients.
    ///   - backoff: The strategy every client asks for its delays; a jittered one carries its own seeded generator.
    ///   - network: The generator for network hops.
    static func run(
        clients clientCount: Int, backoff: BackoffStrategy<ContinuousClock>, network: inout SplitMix64
    ) -> Outcome {
        var queue = EventQueue<Event>(capacity: 2 * clientCount)
        var clients = [Client](repeating: Client(), count: clientCount)
        var serverVersion = 0
        var calls = 0
        var lastFinish = 0.0

        for client in 0..<clientCount {
            queue.schedule(.read(client: client), at: hop(&network))
        }
        while let (now, event) = queue.next() {
            switch event {
            case .retry(let client):
                queue.schedule(.read(client: client), at: now + hop(&network))
            case .read(let client):
                clients[client].version = serverVersion
                // The response travels back, then the write travels to the server.
                queue.schedule(.write(client: client), at: now + hop(&network) + hop(&network))
            case .write(let client):
                calls += 1
                let answerArrives = now + hop(&network)
                if clients[client].version == serverVersion {
                    serverVersion += 1
                    lastFinish = max(lastFinish, answerArrives)
                } else {
                    let delay = backoff.delay(
                        forRetry: clients[client].failures, previous: clients[client].previousDelay)
                    clients[client].failures += 1
                    clients[client].previousDelay = delay
                    queue.schedule(.retry(client: client), at: answerArrives + milliseconds(delay))
                }
            }
        }
        return Outcome(calls: calls, milliseconds: lastFinish)
    }

    /// One network hop: |N(hopMean, hopStandardDeviation)| milliseconds, by the Box–Muller transform.
    static func hop(_ generator: inout SplitMix64) -> Double {
        let u1 = 1 - generator.nextUnit()  // (0, 1]: log(u1) is finite
        let u2 = generator.nextUnit()
        let z = (-2 * log(u1)).squareRoot() * cos(2 * Double.pi * u2)
        return abs(hopMean + hopStandardDeviation * z)
    }

    static func milliseconds(_ duration: Duration) -> Double {
        let parts = duration.components
        return Double(parts.seconds) * 1_000 + Double(parts.attoseconds) * 1e-15
    }
}
