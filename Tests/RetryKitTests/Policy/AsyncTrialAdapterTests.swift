import Testing

@testable import RetryKit

extension AsyncRetryStep {
    /// The attempt a `.run` step names, `nil` for another step.
    fileprivate var runNumber: Int? {
        if case .run(let number) = self { return number }
        return nil
    }

    /// The delay of a `.wait` step, `nil` for another step.
    fileprivate var waitDelay: Duration? {
        if case .wait(let delay) = self { return delay }
        return nil
    }

    fileprivate var isAwaitCondition: Bool {
        if case .awaitCondition = self { return true }
        return false
    }
}

/// The async side of a run of trials decides nothing: the condition inbox is a FIFO queue that wakes one task, and the
/// trial machine asks the one state machine (stale snapshots, the rest of a pause). Driven by hand, on virtual time.
@Suite("Async trial adapters: condition inbox and trial machine", .timeLimit(.minutes(1)))
struct AsyncTrialAdapterTests {
    private func snapshot(_ value: Bool?, version: UInt64) -> RetryConditionSnapshot {
        RetryConditionSnapshot(value: value, ended: false, version: version)
    }

    private let ignore: RetryStateMachine.ActionObserver = { _, _ in }

    @Test func theInboxQueuesSnapshotsInArrivalOrderAndDropsNone() {
        let inbox = RetryConditionInbox()
        #expect(inbox.take() == nil)
        for version: UInt64 in [2, 1, 2] { inbox.post(snapshot(true, version: version)) }
        #expect(inbox.take()?.version == 2)
        inbox.post(snapshot(false, version: 0))  // older than one taken: still queued, the machine judges it
        #expect([inbox.take(), inbox.take(), inbox.take()].map { $0?.version } == [1, 2, 0])
        #expect(inbox.take() == nil)
    }

    @Test func theInboxWakesTheWaitingTaskOrReturnsAtOnce() async {
        let inbox = RetryConditionInbox()
        inbox.post(snapshot(true, version: 1))
        #expect(await inbox.wait(), "a snapshot is queued already")
        #expect(inbox.take()?.version == 1)

        let waiter = Task { await inbox.wait() }
        inbox.post(snapshot(false, version: 2))
        #expect(await waiter.value)
        #expect(inbox.take()?.isOpen == false)

        let cancelled = Task { await inbox.wait() }
        cancelled.cancel()
        #expect(await cancelled.value == false, "a cancelled task stops waiting")
    }

    @Test func aStaleSnapshotReachesTheMachineAndIsIgnoredThere() {
        let inbox = RetryConditionInbox()
        let trials = AsyncTrialMachine(RetryConfiguration(maxAttempts: 3), conditions: inbox, repeatDelay: nil)
        inbox.post(snapshot(false, version: 2))
        inbox.post(snapshot(true, version: 1))  // arrived late: older than the closed one
        let first = trials.begin(cancelled: false, at: .zero, now: { .zero }, observe: ignore)
        #expect(first.isAwaitCondition, "the newest snapshot, closed, holds the first trial")
        #expect(inbox.take() == nil, "every queued snapshot went to the machine")

        inbox.post(snapshot(true, version: 2))
        #expect(trials.conditionChanged(cancelled: false, at: .seconds(1), observe: ignore) == nil, "the same version")
        inbox.post(snapshot(true, version: 3))
        let opened = trials.conditionChanged(cancelled: false, at: .seconds(2), observe: ignore)
        #expect(opened?.runNumber == 1)
        inbox.post(snapshot(false, version: 1))
        #expect(!trials.attemptSignalled(at: .seconds(3)), "a stale close interrupts nothing")
        inbox.post(snapshot(false, version: 4))
        #expect(trials.attemptSignalled(at: .seconds(4)))
    }

    @Test func theNextCallWaitsWhatTheMachineSaysRemainsOfThePause() {
        let trials = AsyncTrialMachine(RetryConfiguration(maxAttempts: 3), conditions: nil, repeatDelay: .seconds(30))
        #expect(trials.begin(cancelled: false, at: .zero, now: { .zero }, observe: ignore).runNumber == 1)
        trials.succeeded(1, at: .seconds(3), observe: ignore)
        #expect(trials.frame.machine.pauseRemaining(at: .seconds(3)) == .seconds(30))
        let next = trials.begin(cancelled: false, at: .zero, now: { .seconds(10) }, observe: ignore)
        #expect(next.waitDelay == .seconds(23), "the rest of the pause")
        #expect(trials.waited(cancelled: false, at: .seconds(33), observe: ignore).runNumber == 1)
        trials.succeeded(1, at: .seconds(34), observe: ignore)
        let late = trials.begin(cancelled: false, at: .zero, now: { .seconds(100) }, observe: ignore)
        #expect(late.waitDelay == .zero, "a call after the pause waits no more")
        var finished = false
        let cancelled = trials.begin(cancelled: true, at: .zero, now: { .seconds(100) }) { action, _ in
            if case .finish = action { finished = true }
        }
        #expect(finished)
        #expect(trials.isFinished)
        if case .fail(let error) = cancelled {
            #expect(error is CancellationError)
        } else {
            Issue.record("\(cancelled)")
        }
    }
}
