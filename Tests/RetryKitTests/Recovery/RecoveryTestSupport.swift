// A token service and a refresh the tests complete by hand, for the recovery's tests.

import Dispatch
import RetryKit
import RetryKitTesting
import Testing

/// The server's answer to a request with a token it does not accept.
struct Unauthorized: Error, Equatable, CustomStringConvertible {
    let token: String
    var description: String { "401(\(token))" }
}

/// A refresh's own failure.
struct RefreshFailed: Error, Equatable {}

/// A server that accepts one token at a time: `t1`, then `t2` after ``expire()``, and so on. It records the token of
/// every request.
final class TokenServer: Sendable {
    private struct State {
        var valid = 1
        var requests: [String] = []
    }

    private let state = Locked(State())

    /// The token the server accepts now.
    var validToken: String { state.withLock { "t\($0.valid)" } }

    /// The tokens of every request, in order.
    var requests: [String] { state.withLock { $0.requests } }

    /// The current token expires: the server accepts only the next one from now on.
    func expire() {
        state.withLock { $0.valid += 1 }
    }

    /// One request with `token`: its value, or ``Unauthorized``.
    func call(_ token: String) -> Result<String, any Error> {
        state.withLock { s in
            s.requests.append(token)
            return token == "t\(s.valid)" ? .success("ok(\(token))") : .failure(Unauthorized(token: token))
        }
    }
}

/// Refreshes that the test ends by hand (``complete(with:)``), or at once with the server's valid token when `automatic`.
final class ManualRefresh: Sendable {
    private struct State {
        var pending: [@Sendable (Result<String, any Error>) -> Void] = []
        var started: [String?] = []
    }

    private let state = Locked(State())
    private let server: TokenServer
    private let automatic: Bool

    init(server: TokenServer, automatic: Bool = false) {
        self.server = server
        self.automatic = automatic
    }

    /// The refresh function of a ``RetryRecovery``.
    var refresh: @Sendable (String?, @escaping @Sendable (Result<String, any Error>) -> Void) -> Void {
        { current, completion in
            self.state.withLock { s in
                s.started.append(current)
                if !self.automatic { s.pending.append(completion) }
            }
            if self.automatic { completion(.success(self.server.validToken)) }
        }
    }

    /// The credential each refresh started from, in order.
    var started: [String?] { state.withLock { $0.started } }

    /// Refreshes started and not completed yet.
    var pendingCount: Int { state.withLock { $0.pending.count } }

    /// Completes every pending refresh with `result` (the server's valid token by default).
    func complete(with result: Result<String, any Error>? = nil) {
        let pending = state.withLock { s in
            defer { s.pending = [] }
            return s.pending
        }
        for completion in pending { completion(result ?? .success(server.validToken)) }
    }

    /// Drops every pending completion without calling it.
    func abandon() {
        let pending = state.withLock { s in
            defer { s.pending = [] }
            return s.pending
        }
        withExtendedLifetime(pending) {}
    }
}

/// A recovery of `TokenServer` tokens: recognises ``Unauthorized``; its window measures `scheduler`'s virtual time.
func tokenRecovery(
    _ refresh: ManualRefresh, credential: String? = "t1", scheduler: VirtualScheduler,
    window: RecoveryWindow = RecoveryWindow(), requiresRefresh: @escaping @Sendable (String) -> Bool = { _ in false }
) -> RetryRecovery<String> {
    RetryRecovery(
        credential: credential, window: window, when: { $0 is Unauthorized }, requiresRefresh: requiresRefresh,
        refresh: refresh.refresh, now: { scheduler.now })
}

/// An attempt that lasts until its task is cancelled: ``started`` fires once it waits, ``cancelled`` from its task's
/// cancellation handler. Never blocks a thread.
final class AttemptUntilCancelled: Sendable {
    let started = AsyncSignal()
    let cancelled = AsyncSignal()

    /// Suspends until the calling task is cancelled, then throws `CancellationError`.
    func run() async throws -> Never {
        await withTaskCancellationHandler {
            started.fire()
            await cancelled.wait()
        } onCancel: {
            cancelled.fire()
        }
        throw CancellationError()
    }
}
