import Dispatch
import RetryKit
import RetryKitTesting
import Testing

/// The styles a run with a recovery starts in.
enum RecoveryParityStyle: String, CaseIterable, Sendable, CustomTestStringConvertible {
    /// `plan.execute(on:scheduler:) { token, attempt, done in … }`.
    case callback = "execute(on:)"
    /// `plan.executeTask(on:scheduler:) { token, attempt in … }`.
    case callbackTask = "executeTask(on:)"
    /// `plan.execute(on:scheduler:)`, its result awaited with `handle.value` (cancel: the awaiting task).
    case handleValue = "execute(on:), handle.value"
    /// `try await plan.execute(scheduler:) { token, attempt in … }` (cancel: the calling task).
    case async = "async execute"

    var testDescription: String { rawValue }
}

/// What one retrier of a parity scenario reported: its events (with the whole summary) and its result.
final class RecoveryParityLog: Sendable {
    private let entries = Locked<[String]>([])

    var lines: [String] { entries.withLock { $0 } }
    var isFinished: Bool { lines.contains { $0.hasPrefix("result") } }

    func append(_ line: String) { entries.withLock { $0.append(line) } }

    var observer: @Sendable (RetryEvent<String>) -> Void {
        { event in
            switch event {
            case .finished(let summary, let error):
                self.append(
                    "finished \(summary.reason) attempts \(summary.attempts) at \(summary.elapsed) recoveries "
                        + "\(summary.recoveries) waited \(summary.recoveryWait) \(error.map { "\($0)" } ?? "")")
            default:
                self.append(cbDescribe(event))
            }
        }
    }

    func result(_ result: Result<String, any Error>) {
        switch result {
        case .success(let value): append("result \(value)")
        case .failure(let error): append("result error \(error)")
        }
    }
}

/// Recovery scenarios run in every style, on virtual time: each retrier's log must be the same in all of them.
@Suite("Recovery parity: the same events in every style", .timeLimit(.minutes(2)))
struct RecoveryParityTests {
    /// Starts a run of `plan` in `style` that calls `server` with its token, logging to `log`; returns how to cancel it.
    func start(
        _ style: RecoveryParityStyle, _ plan: RecoveringRetryPlan<String>, scheduler: VirtualScheduler,
        server: TokenServer, log: RecoveryParityLog
    ) -> @Sendable () -> Void {
        let queue = DispatchQueue(label: "recovery-parity")
        let completion: @Sendable (Result<String, any Error>, RetrySummary) -> Void = { result, _ in log.result(result)
        }
        switch style {
        case .callback:
            let handle = plan.execute(
                on: queue, scheduler: scheduler, operation: { token, _, done in done(server.call(token)) },
                observer: log.observer, completion: completion)
            return { handle.cancel() }
        case .callbackTask:
            let handle = plan.executeTask(
                on: queue, scheduler: scheduler, operation: { token, _ in try server.call(token).get() },
                observer: log.observer, completion: completion)
            return { handle.cancel() }
        case .handleValue:
            let handle = plan.execute(
                on: queue, scheduler: scheduler, operation: { token, _, done in done(server.call(token)) },
                observer: log.observer, completion: { _, _ in })
            let task = Task {
                do {
                    log.result(.success(try await handle.value))
                } catch {
                    log.result(.failure(error))
                }
            }
            return { task.cancel() }
        case .async:
            let task = Task {
                do {
                    log.result(
                        .success(
                            try await plan.execute(
                                scheduler: scheduler, operation: { token, _ in try server.call(token).get() },
                                observer: log.observer)))
                } catch {
                    log.result(.failure(error))
                }
            }
            return { task.cancel() }
        }
    }

    /// Runs the work due on `scheduler` until `ready` holds (attempts of the task styles and awaiting tasks run for
    /// real, so this looks again every millisecond of real time, up to 10 s).
    func pump(
        _ scheduler: VirtualScheduler, _ line: Int = #line, until ready: () -> Bool
    ) async throws {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: .seconds(10))
        while true {
            scheduler.advance()
            if ready() { return }
            try #require(clock.now < deadline, "the run did not get to line \(line) within 10 s")
            try await Task.sleep(for: .milliseconds(1))
        }
    }

    /// One refresh serves a failure and two runs that start while it runs; a cancel while waiting; then a second expiry
    /// whose refresh fails.
    func scenario(_ style: RecoveryParityStyle) async throws -> [[String]] {
        let scheduler = VirtualScheduler()
        let server = TokenServer()
        server.expire()
        let refresh = ManualRefresh(server: server)
        let recovery = tokenRecovery(refresh, scheduler: scheduler)
        let plan = RetryPlan.constantDelay(.seconds(1)).giveUpAfter(maxAttempts: 4).recovering(with: recovery)
        let logs = (0..<5).map { _ in RecoveryParityLog() }

        _ = start(style, plan, scheduler: scheduler, server: server, log: logs[0])
        try await pump(scheduler) { refresh.pendingCount == 1 && recovery.core.waitingCount == 1 }  // its 401
        scheduler.advance(by: .milliseconds(300))
        _ = start(style, plan, scheduler: scheduler, server: server, log: logs[1])
        let cancel = start(style, plan, scheduler: scheduler, server: server, log: logs[2])
        try await pump(scheduler) { recovery.core.waitingCount == 3 }
        scheduler.advance(by: .milliseconds(200))
        cancel()
        try await pump(scheduler) { logs[2].isFinished && recovery.core.waitingCount == 2 }
        scheduler.advance(by: .milliseconds(500))
        refresh.complete()
        try await pump(scheduler) { logs[0].isFinished && logs[1].isFinished }

        server.expire()
        _ = start(style, plan, scheduler: scheduler, server: server, log: logs[3])
        try await pump(scheduler) { refresh.pendingCount == 1 && recovery.core.waitingCount == 1 }
        _ = start(style, plan, scheduler: scheduler, server: server, log: logs[4])
        try await pump(scheduler) { recovery.core.waitingCount == 2 }
        scheduler.advance(by: .seconds(2))
        refresh.complete(with: .failure(RefreshFailed()))
        try await pump(scheduler) { logs[3].isFinished && logs[4].isFinished }
        #expect(recovery.refreshes == 2, "\(style)")
        #expect(scheduler.pendingCount == 0, "\(style): no timer or hop is left behind")
        return logs.map(\.lines)
    }

    @Test("Refresh once, wait, cancel while waiting, a failed refresh", arguments: RecoveryParityStyle.allCases)
    func sameLogsAsTheCallbackStyle(_ style: RecoveryParityStyle) async throws {
        let expected = try await scenario(.callback)
        let logs = try await scenario(style)
        #expect(logs == expected, "\(style)")
        #expect(
            expected[0] == [
                "start 1", "fail 1 401(t1) recover", "start 2", "ok 2 ok(t2)",
                "finished succeeded attempts 2 at 1.0 seconds recoveries 1 waited 1.0 seconds ", "result ok(t2)",
            ])
        #expect(
            expected[1] == [
                "start 1", "ok 1 ok(t2)",
                "finished succeeded attempts 1 at 0.7 seconds recoveries 0 waited 0.7 seconds ", "result ok(t2)",
            ])
        #expect(
            expected[2] == [
                "finished cancelled attempts 0 at 0.2 seconds recoveries 0 waited 0.2 seconds CancellationError()",
                "result error CancellationError()",
            ])
        #expect(expected[3].prefix(2) == ["start 1", "fail 1 401(t2) recover"])
        #expect(expected[3].last?.hasPrefix("result error RetryError(recovery failed after 1 attempt") == true)
        #expect(expected[4].first?.hasPrefix("finished recoveryFailed attempts 0 at 2.0 seconds recoveries 0") == true)
    }
}
