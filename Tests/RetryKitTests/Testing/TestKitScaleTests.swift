import Dispatch
import RetryKit
import RetryKitTesting
import Testing

/// The virtual-time test kit at scale and at the ends of its range (issue 13.1): ordering by (deadline, order of
/// scheduling) with many items and many equal deadlines, cancellation in bulk, and no trap whatever the duration.
/// These check results, not speed: the speed is measured in `Benchmarks/` (`TestKit`: 100,000 items, 10,000
/// sleepers, release build). The counts here keep a debug run short: these synchronous tests hold a thread of the
/// shared pool while they run, which the real-clock tests running beside them need.
@Suite("Test kit: scale and range", .timeLimit(.minutes(3)))
struct TestKitScaleTests {
    let queue = DispatchQueue(label: "test-kit-scale")

    // MARK: - VirtualScheduler

    @Test("20,000 items run in (deadline, order of scheduling) order; cancelled ones never run")
    func schedulerOrdersAndCancelsAtScale() {
        let scheduler = VirtualScheduler()
        var generator = SeededRandomNumberGenerator(seed: 13_01)
        let count = 20_000
        // Few distinct deadlines, so that most items share theirs with thousands of others.
        let milliseconds = (0..<count).map { _ in Int(generator.next() % 50) }
        let deadlines = milliseconds.map { Duration.milliseconds($0) }
        let ran = Locked<[Int]>([])
        var tokens: [VirtualScheduler.Token] = []
        tokens.reserveCapacity(count)
        for (index, deadline) in deadlines.enumerated() {
            tokens.append(scheduler.schedule(after: deadline, on: queue) { ran.withLock { $0.append(index) } })
        }
        #expect(scheduler.pendingCount == count)
        #expect(scheduler.nextDeadline == deadlines.min())

        // Cancel every third item, and cancel some of them twice.
        let cancelled = Set(stride(from: 0, to: count, by: 3))
        for index in cancelled { tokens[index].cancel() }
        for index in stride(from: 0, to: count, by: 30) { tokens[index].cancel() }
        #expect(scheduler.pendingCount == count - cancelled.count)

        scheduler.advance(by: .milliseconds(24))
        scheduler.run()

        // A stable bucket sort by deadline: the order of scheduling within each deadline.
        var buckets = [[Int]](repeating: [], count: 50)
        for index in 0..<count where !cancelled.contains(index) {
            buckets[milliseconds[index]].append(index)
        }
        let expected = Array(buckets.joined())
        #expect(ran.withLock { $0 } == expected)
        #expect(scheduler.pendingCount == 0)
        #expect(scheduler.nextDeadline == nil)
        #expect(scheduler.now == deadlines.max())
    }

    @Test("Items scheduled while running keep the FIFO order among equal deadlines")
    func schedulerFIFOWithReentrantScheduling() {
        let scheduler = VirtualScheduler()
        let ran = Locked<[String]>([])
        @Sendable func note(_ label: String) -> @Sendable () -> Void { { ran.withLock { $0.append(label) } } }
        for index in 0..<1_000 {
            _ = scheduler.schedule(after: .seconds(1), on: queue, note("a\(index)"))
        }
        // Runs at 0.5 s and schedules for 1 s: after every item already due then.
        _ = scheduler.schedule(after: .milliseconds(500), on: queue) {
            for index in 0..<1_000 {
                _ = scheduler.schedule(after: .milliseconds(500), on: self.queue, note("b\(index)"))
            }
        }
        scheduler.run()
        #expect(ran.withLock { $0 } == (0..<1_000).map { "a\($0)" } + (0..<1_000).map { "b\($0)" })
    }

    @Test("Cancelling most items, then scheduling more, keeps the order and the count right")
    func schedulerCancelChurn() {
        let scheduler = VirtualScheduler()
        let ran = Locked<[Int]>([])
        var live: [Int] = []
        for round in 0..<10 {
            var tokens: [(Int, VirtualScheduler.Token)] = []
            for item in 0..<1_000 {
                let index = round * 1_000 + item
                let token = scheduler.schedule(after: .seconds(Int64(1_000 - item)), on: queue) {
                    ran.withLock { $0.append(index) }
                }
                tokens.append((index, token))
            }
            for (index, token) in tokens {
                if index % 10 == 0 { live.append(index) } else { token.cancel() }
            }
            #expect(scheduler.pendingCount == live.count)
        }
        scheduler.run()
        let expected = live.sorted { (1_000 - $0 % 1_000, $0) < (1_000 - $1 % 1_000, $1) }
        #expect(ran.withLock { $0 } == expected)
    }

    @Test("No advance, delay or starting time traps, whatever its size")
    func schedulerHugeDurationsDoNotTrap() {
        let huge = Duration.seconds(Int64.max)
        let scheduler = VirtualScheduler()
        let ran = Locked<[String]>([])
        _ = scheduler.schedule(after: .seconds(1), on: queue) { ran.withLock { $0.append("1 s") } }
        _ = scheduler.schedule(after: huge * 10, on: queue) { ran.withLock { $0.append("far") } }
        for _ in 0..<20 { scheduler.advance(by: huge) }  // 20 × Int64.max seconds overflows Duration itself
        #expect(ran.withLock { $0 } == ["1 s", "far"])
        #expect(scheduler.now == huge, "time saturates at Int64.max seconds")
        scheduler.advance(by: huge * 18)
        scheduler.advance(by: .seconds(Int64.min))
        #expect(scheduler.now == huge)

        // Work scheduled at the end of time still runs, at the end of time, in the order it was scheduled.
        _ = scheduler.schedule(after: huge, on: queue) { ran.withLock { $0.append("at the end") } }
        scheduler.execute(on: queue) { ran.withLock { $0.append("now") } }
        #expect(scheduler.nextDeadline == huge)
        scheduler.advance()
        #expect(ran.withLock { $0 } == ["1 s", "far", "at the end", "now"])

        let early = VirtualScheduler(now: .seconds(Int64.min) * 18)
        #expect(early.now == .seconds(Int64.min))
        early.advance(by: huge * 18)
        #expect(early.now == .seconds(-1), "Int64.min s + Int64.max s")
        let late = VirtualScheduler(now: huge * 18)
        #expect(late.now == huge)
        late.run()
    }

    @Test("A retrier on a scheduler at the end of time still finishes")
    func retrierAtTheEndOfTime() {
        let scheduler = VirtualScheduler(now: .seconds(Int64.max) - .seconds(1))
        let result = Locked<Result<Int, any Error>?>(nil)
        retry(
            maxAttempts: 3, on: queue, scheduler: scheduler,
            operation: { attempt, done in
                attempt.number < 3 ? done(.failure(CBError(code: attempt.number))) : done(.success(attempt.number))
            }, strategy: { _ in .backoff(.constant(.seconds(Int64.max))) },
            completion: { outcome, _ in result.withLock { $0 = outcome } })
        for _ in 0..<5 { scheduler.advance(by: .seconds(Int64.max)) }
        #expect(result.withLock { $0?.cbValue } == 3)
    }

    // MARK: - VirtualClock

    @Test("2,000 sleepers: deadlines in order, cancellation in bulk, every remaining sleeper woken at its deadline")
    func clockAtScale() async throws {
        let clock = VirtualClock()
        var generator = SeededRandomNumberGenerator(seed: 13_02)
        let count = 2_000
        let deadlines = (0..<count).map { _ in
            VirtualClock.Instant.zero.advanced(by: .seconds(1 + Int64(generator.next() % 100)))
        }
        let tasks = deadlines.map { deadline in
            Task { () throws -> VirtualClock.Instant in
                try await clock.sleep(until: deadline)
                return clock.now
            }
        }
        await clock.waitForSleepers(count)
        #expect(clock.sleeperCount == count)
        #expect(clock.nextDeadline == deadlines.min())
        #expect(clock.pendingDeadlines == deadlines.sorted())

        for index in stride(from: 0, to: count, by: 4) { tasks[index].cancel() }
        for index in stride(from: 0, to: count, by: 4) {
            await #expect(throws: CancellationError.self) { try await tasks[index].value }
        }
        #expect(clock.sleeperCount == count - count / 4)
        let remaining = deadlines.indices.filter { $0 % 4 != 0 }.map { deadlines[$0] }
        #expect(clock.pendingDeadlines == remaining.sorted())

        await clock.advance(by: .seconds(100))
        for index in deadlines.indices where index % 4 != 0 {
            let wokeAt = try await tasks[index].value
            #expect(wokeAt >= deadlines[index])
        }
        #expect(clock.sleeperCount == 0)
        #expect(clock.now == .zero.advanced(by: .seconds(100)))
    }

    @Test("Sleepers due at the same instant wake first-in first-out")
    func clockFIFOAtEqualDeadlines() async throws {
        let clock = VirtualClock()
        let woke = Locked<[Int]>([])
        var tasks: [Task<Void, any Error>] = []
        // Registered one at a time, alternating between two deadlines, the later one registered first.
        for index in 0..<200 {
            let deadline = VirtualClock.Instant.zero.advanced(by: .seconds(index % 2 == 0 ? 2 : 1))
            tasks.append(
                Task {
                    try await clock.sleep(until: deadline)
                    woke.withLock { $0.append(index) }
                })
            await clock.waitForSleepers(index + 1)
        }
        // One at a time: each woken task records itself before the next is woken.
        for step in 1...200 {
            await clock.wakeNext()
            #expect(await cbWait { woke.withLock { $0.count } == step })
        }
        for task in tasks { try await task.value }
        let odd = stride(from: 1, to: 200, by: 2).map { $0 }
        let even = stride(from: 0, to: 200, by: 2).map { $0 }
        #expect(woke.withLock { $0 } == odd + even)
    }

    @Test("No advance, deadline or instant arithmetic traps, whatever its size")
    func clockHugeDurationsDoNotTrap() async throws {
        let huge = Duration.seconds(Int64.max)
        let clock = VirtualClock()
        let far = Task { try await clock.sleep(for: huge * 18) }
        await clock.waitForSleepers()
        for _ in 0..<20 { await clock.advance(by: huge) }
        try await far.value
        #expect(clock.now == .zero.advanced(by: huge))
        await clock.advance(by: huge * 18)
        await clock.advance(by: .seconds(Int64.min))
        await clock.advance(to: VirtualClock.Instant(offset: huge * 18))
        #expect(clock.now == .zero.advanced(by: huge))
        try await clock.sleep(for: huge)  // at the end of time: nothing later to wait for

        let end = VirtualClock.Instant(offset: huge)
        let start = VirtualClock.Instant(offset: .seconds(Int64.min))
        #expect(start.duration(to: end) == huge)
        #expect(end.duration(to: start) == .seconds(Int64.min))
        #expect(start.advanced(by: .seconds(Int64.min)) == start)
        #expect(VirtualClock(now: VirtualClock.Instant(offset: huge * 18)).now == end)
    }
}
