import Dispatch
import RetryKit
import Testing

/// Counts what an `AttemptSlot` reports, from any thread.
private final class SlotProbe: Sendable {
    private let state = Locked((results: [Result<Int, any Error>](), duplicates: 0, hooks: 0))

    var results: [Result<Int, any Error>] { state.withLock { $0.results } }
    var duplicates: Int { state.withLock { $0.duplicates } }
    var hooks: Int { state.withLock { $0.hooks } }

    func slot() -> AttemptSlot<Int> {
        AttemptSlot(
            onResult: { result in self.state.withLock { $0.results.append(result) } },
            onDuplicate: { self.state.withLock { $0.duplicates += 1 } })
    }

    func hook() -> @Sendable () -> Void {
        { self.state.withLock { $0.hooks += 1 } }
    }
}

private extension Result where Failure == any Error {
    var value: Success? { try? get() }
    var error: (any Error)? {
        if case .failure(let error) = self { return error }
        return nil
    }
}

@Suite("Core: attempt completion")
struct AttemptCompletionTests {
    @Test("the first result is delivered once; later calls are reported as duplicates")
    func firstResultOnce() {
        let probe = SlotProbe()
        let done = AttemptCompletion(probe.slot())
        done(.success(1))
        done(.success(2))
        done(.failure(TestError(3)))
        #expect(probe.results.count == 1)
        #expect(probe.results.first?.value == 1)
        #expect(probe.duplicates == 2)
        #expect(!done.isCancelled)
    }

    @Test("(Value?, Error?) style: an error wins, a value succeeds, (nil, nil) is .missingResult")
    func legacyStyle() {
        let cases: [(Int?, (any Error)?, String)] = [
            (5, nil, "value 5"),
            (nil, TestError(1), "error TestError(1)"),
            (5, TestError(2), "error TestError(2)"),
            (nil, nil, "missingResult"),
        ]
        for (value, error, expected) in cases {
            let probe = SlotProbe()
            AttemptCompletion(probe.slot())(value, error)
            let result = probe.results.first
            let actual: String
            if let value = result?.value {
                actual = "value \(value)"
            } else if let retry = result?.error as? RetryError, retry.reason == .missingResult {
                actual = "missingResult"
            } else {
                actual = "error \(result?.error.map { "\($0)" } ?? "none")"
            }
            #expect(probe.results.count == 1)
            #expect(actual == expected)
        }
    }

    @Test("the cancel hook runs once on abandon, and isCancelled turns true")
    func hookRunsOnceOnAbandon() {
        let probe = SlotProbe()
        let slot = probe.slot()
        let done = AttemptCompletion(slot)
        done.onCancel(probe.hook())
        #expect(probe.hooks == 0)
        slot.abandon()
        slot.abandon()
        #expect(probe.hooks == 1)
        #expect(done.isCancelled)
    }

    @Test("a hook registered after abandon runs at once, once")
    func hookAfterAbandon() {
        let probe = SlotProbe()
        let slot = probe.slot()
        slot.abandon()
        AttemptCompletion(slot).onCancel(probe.hook())
        #expect(probe.hooks == 1)
        slot.abandon()
        #expect(probe.hooks == 1)
    }

    @Test("a later registration replaces an earlier one that has not run")
    func hookReplaced() {
        let first = SlotProbe()
        let second = SlotProbe()
        let slot = first.slot()
        let done = AttemptCompletion(slot)
        done.onCancel(first.hook())
        done.onCancel(second.hook())
        slot.abandon()
        #expect(first.hooks == 0)
        #expect(second.hooks == 1)
    }

    @Test("the hook never runs after delivery, registered before or after it")
    func hookNeverAfterDelivery() {
        let probe = SlotProbe()
        let slot = probe.slot()
        let done = AttemptCompletion(slot)
        done.onCancel(probe.hook())
        done(.success(1))
        slot.abandon()
        done.onCancel(probe.hook())
        #expect(probe.hooks == 0)
        #expect(probe.results.count == 1)
    }

    @Test("a result arriving after abandon is ignored; calls after it count as duplicates")
    func resultAfterAbandon() {
        let probe = SlotProbe()
        let slot = probe.slot()
        slot.abandon()
        let done = AttemptCompletion(slot)
        done(.success(1))
        #expect(probe.results.isEmpty)
        #expect(probe.duplicates == 0)
        done(.success(2))
        #expect(probe.results.isEmpty)
        #expect(probe.duplicates == 1)
    }

    @Test("racing deliver against abandon: exactly one of result and hook, 1,000 times")
    func deliverRacesAbandon() {
        for _ in 0..<1_000 {
            let probe = SlotProbe()
            let slot = probe.slot()
            let done = AttemptCompletion(slot)
            done.onCancel(probe.hook())
            DispatchQueue.concurrentPerform(iterations: 2) { index in
                if index == 0 { done(.success(index)) } else { slot.abandon() }
            }
            #expect(probe.results.count + probe.hooks == 1)
            #expect(probe.duplicates == 0)
        }
    }

    @Test("racing two deliveries: one result and one duplicate, 1,000 times")
    func deliverRacesDeliver() {
        for _ in 0..<1_000 {
            let probe = SlotProbe()
            let done = AttemptCompletion(probe.slot())
            DispatchQueue.concurrentPerform(iterations: 2) { index in done(.success(index)) }
            #expect(probe.results.count == 1)
            #expect(probe.duplicates == 1)
        }
    }

    @Test("racing hook registration against abandon: the hook runs exactly once, 1,000 times")
    func registerRacesAbandon() {
        for _ in 0..<1_000 {
            let probe = SlotProbe()
            let slot = probe.slot()
            DispatchQueue.concurrentPerform(iterations: 2) { index in
                if index == 0 { AttemptCompletion(slot).onCancel(probe.hook()) } else { slot.abandon() }
            }
            #expect(probe.hooks == 1)
        }
    }
}
