import Dispatch
import RetryKitTesting
import Testing

@testable import RetryKit

/// Collects a stream to its end.
private func collect<Value>(_ events: AsyncStream<RetryEvent<Value>>) async -> [String] {
    var lines: [String] = []
    for await event in events { lines.append(cbDescribe(event)) }
    return lines
}

@Suite("RetryEvent.makeStream", .timeLimit(.minutes(3)))
struct EventStreamTests {
    let queue = DispatchQueue(label: "event-stream-tests")

    @Test func callbackRunLosesNoEventEmittedBeforeTheFirstNext() async {
        let scheduler = VirtualScheduler()
        let (events, observer) = RetryEvent<Int>.makeStream()
        RetryPlan.constantDelay(.seconds(1)).giveUpAfter(maxAttempts: 3).execute(
            on: queue, scheduler: scheduler,
            operation: { attempt, done in
                attempt.number < 2 ? done(.failure(CBError(code: attempt.number))) : done(.success(attempt.number))
            }, observer: observer, completion: { _, _ in })
        scheduler.run()  // the run is over before anyone listens
        #expect(
            await collect(events) == [
                "start 1", "fail 1 E1 retry 1.0 seconds", "start 2", "ok 2 2", "finished succeeded 2",
            ])
    }

    @Test func asyncRunStreamsWhileItRuns() async throws {
        let clock = VirtualClock()
        let (events, observer) = RetryEvent<String>.makeStream()
        let run = Task {
            try await RetryPlan.constantDelay(.seconds(5)).execute(
                clock: clock,
                operation: { attempt in
                    if attempt.number < 3 { throw CBError(code: attempt.number) }
                    return "v"
                }, observer: observer)
        }
        var iterator = events.makeAsyncIterator()
        #expect(await iterator.next().map(cbDescribe) == "start 1")
        #expect(await iterator.next().map(cbDescribe) == "fail 1 E1 retry 5.0 seconds")
        #expect(try await clock.run(until: run) == "v")
        var rest: [String] = []
        while let event = await iterator.next() { rest.append(cbDescribe(event)) }
        #expect(rest == ["start 2", "fail 2 E2 retry 5.0 seconds", "start 3", "ok 3 v", "finished succeeded 3"])
    }

    @Test func aGatedRunEndsTheStreamOnlyOnceAtItsEnd() async {
        let scheduler = VirtualScheduler()
        let condition = RetryCondition(true)
        let (events, observer) = RetryEvent<Int>.makeStream()
        let hooks = CBCounter()
        let kept = CBKeeper<Int>()
        RetryPlan.noDelay.onlyWhen(condition).execute(
            on: queue, scheduler: scheduler,
            operation: { attempt, done in
                done.onCancel { hooks.increment() }
                if hooks.count > 0 { done(.success(attempt.number)) } else { kept.keep(done) }
            }, observer: observer, completion: { _, _ in })
        scheduler.advance()
        condition.value = false  // abandons trial 1; its `finished` is not forwarded
        condition.value = true
        scheduler.run()
        #expect(
            await collect(events) == [
                "start 1", "fail 1 CancellationError() giveUp cancelled", "start 1", "ok 1 1", "finished succeeded 2",
            ])
    }

    @Test func aRepeatingSequenceStreamsEveryTrialAndFinishesWhenDropped() async throws {
        let calls = AsyncCounter()
        let events: AsyncStream<RetryEvent<Int>>
        do {
            let (stream, observer) = RetryEvent<Int>.makeStream()
            events = stream
            let sequence = RetryPlan.noDelay.repeating(withDelay: .seconds(1)).values(
                clock: InstantClock(), { _ in calls.increment() }, observer: observer)
            var iterator = sequence.makeAsyncIterator()
            _ = try await iterator.next()
            _ = try await iterator.next()
        }
        // The sequence and its iterator are gone: the observer was released, so the stream ends without `finished`.
        #expect(await collect(events) == ["start 1", "ok 1 1", "start 1", "ok 1 2"])
    }

    @Test func aLateDuplicateAfterFinishedIsDropped() async {
        let scheduler = VirtualScheduler()
        let (events, observer) = RetryEvent<Int>.makeStream()
        let done = CBSlot<AttemptCompletion<Int>>()
        RetryPlan.noDelay.execute(
            on: queue, scheduler: scheduler,
            operation: { _, completion in
                done.set(completion)
                completion(.success(1))
            }, observer: observer, completion: { _, _ in })
        scheduler.run()
        done.get?(.success(2))
        scheduler.run()
        #expect(await collect(events) == ["start 1", "ok 1 1", "finished succeeded 1"])
    }
}
