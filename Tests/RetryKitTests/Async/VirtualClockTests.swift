import RetryKit
import RetryKitTesting
import Testing

@Suite("VirtualClock and InstantClock", .timeLimit(.minutes(3)))
struct VirtualClockTests {
    private func at(_ seconds: Int64) -> VirtualClock.Instant {
        .zero.advanced(by: .seconds(seconds))
    }

    @Test("A sleeper wakes when time reaches its deadline, not before")
    func wakesAtTheDeadline() async throws {
        let clock = VirtualClock()
        let woke = AsyncCounter()
        let task = Task {
            try await clock.sleep(for: .seconds(5))
            woke.increment()
            return clock.now
        }
        await clock.waitForSleepers()
        #expect(clock.nextDeadline == at(5))
        await clock.advance(by: .seconds(4))
        #expect(clock.sleeperCount == 1)
        #expect(woke.value == 0)
        #expect(clock.now == at(4))
        await clock.advance(by: .seconds(1))
        #expect(try await task.value == at(5))
        #expect(woke.value == 1)
        #expect(clock.sleeperCount == 0)
    }

    @Test("A deadline that is not in the future returns at once")
    func pastDeadline() async throws {
        let clock = VirtualClock(now: at(10))
        try await clock.sleep(until: at(3))
        try await clock.sleep(until: at(10))
        try await clock.sleep(for: .zero)
        #expect(clock.now == at(10))
        #expect(clock.sleeperCount == 0)
    }

    @Test("Sleepers due at the same instant wake first-in first-out")
    func fifoAtTheSameInstant() async throws {
        let clock = VirtualClock()
        var tasks: [Task<Void, any Error>] = []
        for index in 0..<3 {
            tasks.append(Task { try await clock.sleep(until: at(2)) })
            await clock.waitForSleepers(index + 1)
        }
        #expect(clock.pendingDeadlines == [at(2), at(2), at(2)])
        // Wake exactly one sleeper, then cancel all: only the first registered may have slept to the end.
        #expect(await clock.wakeNext() == at(2))
        for task in tasks {
            task.cancel()
        }
        var outcomes: [String] = []
        for task in tasks {
            switch await task.result {
            case .success: outcomes.append("woke")
            case .failure(let error): outcomes.append(error is CancellationError ? "cancelled" : "\(error)")
            }
        }
        #expect(outcomes == ["woke", "cancelled", "cancelled"])
    }

    @Test("advance wakes due sleepers in deadline order and leaves later ones asleep")
    func advanceWakesInOrder() async throws {
        let clock = VirtualClock()
        let order = AsyncLog<Int>()
        var tasks: [Task<Void, any Error>] = []
        for (index, seconds) in [3, 1, 2, 9].enumerated() {
            tasks.append(
                Task {
                    try await clock.sleep(until: at(Int64(seconds)))
                    order.append(seconds)
                })
            await clock.waitForSleepers(index + 1)
        }
        #expect(clock.pendingDeadlines == [at(1), at(2), at(3), at(9)])
        await clock.advance(to: at(5))
        for task in tasks.prefix(3) {
            try await task.value
        }
        #expect(Set(order.values) == [1, 2, 3])
        #expect(clock.pendingDeadlines == [at(9)])
        #expect(clock.now == at(5))
        tasks[3].cancel()
        await #expect(throws: CancellationError.self) { try await tasks[3].value }
    }

    @Test("run() wakes every sleeper and leaves time at the last deadline")
    func runWakesEverything() async throws {
        let clock = VirtualClock()
        let first = Task { try await clock.sleep(until: at(7)) }
        await clock.waitForSleepers(1)
        let second = Task { try await clock.sleep(until: at(3)) }
        await clock.waitForSleepers(2)
        await clock.run()
        try await first.value
        try await second.value
        #expect(clock.now == at(7))
        #expect(clock.sleeperCount == 0)
        #expect(await clock.wakeNext() == nil)
    }

    @Test("run(until:) drives a retrier through all its waits")
    func runUntilDrivesARetrier() async throws {
        let clock = VirtualClock()
        let calls = AsyncCounter()
        let task = Task {
            try await retry(maxAttempts: 4, clock: clock) {
                if calls.increment() < 4 { throw AsyncTestError(id: calls.value) }
                return "done"
            } strategy: { _ in
                .backoff(.linear(a: .seconds(10), b: .seconds(1)))
            }
        }
        #expect(try await clock.run(until: task) == "done")
        #expect(clock.now == at(1 + 11 + 21))
        let never = Task<Int, Never> { 5 }
        #expect(await clock.run(until: never) == 5)
    }

    @Test("Cancelling a sleeping task wakes it at once with CancellationError; time does not move")
    func cancellationWakesPromptly() async throws {
        let clock = VirtualClock()
        let task = Task { try await clock.sleep(for: .seconds(3600)) }
        await clock.waitForSleepers()
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(clock.sleeperCount == 0)
        #expect(clock.now == .zero)
    }

    @Test("An already-cancelled task throws without becoming a sleeper")
    func alreadyCancelled() async throws {
        let clock = VirtualClock()
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await clock.sleep(for: .seconds(1))
        }
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(clock.sleeperCount == 0)
    }

    @Test("waitForSleepers returns when its own task is cancelled")
    func waitForSleepersIsCancellable() async throws {
        let clock = VirtualClock()
        let waiter = Task {
            await clock.waitForSleepers(5)
            return clock.sleeperCount
        }
        waiter.cancel()
        #expect(await waiter.value == 0)
    }

    @Test("Many sleepers racing cancellation and advances each end exactly once")
    func sleepersRaceCancellation() async throws {
        let clock = VirtualClock()
        let outcomes = AsyncCounter()
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<200 {
                let task = Task { try await clock.sleep(for: .milliseconds(index % 7 + 1)) }
                group.addTask {
                    if index.isMultiple(of: 2) { task.cancel() }
                    _ = await task.result
                    outcomes.increment()
                }
            }
            group.addTask {
                // Sleepers register whenever their tasks get to run; keep moving time until every one has ended.
                while outcomes.value < 200 {
                    await clock.advance(by: .milliseconds(1))
                    await Task.yield()
                }
            }
        }
        #expect(outcomes.value == 200)
        #expect(clock.sleeperCount == 0)
    }

    @Test("InstantClock: sleeps return at once and move time by the duration slept; copies share time")
    func immediateClock() async throws {
        let clock = InstantClock()
        let copy = clock
        try await clock.sleep(for: .seconds(3))
        try await copy.sleep(for: .milliseconds(500))
        try await clock.sleep(until: .zero.advanced(by: .seconds(1)))  // in the past: time does not go back
        #expect(clock.now == .zero.advanced(by: .milliseconds(3500)))
        #expect(copy.now == clock.now)

        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await clock.sleep(for: .seconds(10))
        }
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(clock.now == .zero.advanced(by: .milliseconds(3500)))
    }

    @Test("InstantClock: a retrier's waits add up on it")
    func instantClockAddsUpWaits() async throws {
        let calls = AsyncCounter()
        let value = try await retry(maxAttempts: 4, clock: InstantClock()) {
            if calls.increment() < 4 { throw AsyncTestError(id: calls.value) }
            return calls.value
        } strategy: { _ in
            .backoff(.exponential(a: .seconds(1), b: 2))
        }
        #expect(value == 4)

        let clock = InstantClock()
        _ = try await retry(maxAttempts: 4, clock: clock) {
            if calls.increment() < 8 { throw AsyncTestError(id: calls.value) }
            return calls.value
        } strategy: { _ in
            .backoff(.exponential(a: .seconds(1), b: 2))
        }
        #expect(clock.now == .zero.advanced(by: .seconds(1 + 2 + 4)))
    }
}
