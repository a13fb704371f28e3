import Dispatch
import RetryKit
import RetryKitTesting
import Testing

extension CallbackRunnerTests {
    @Suite("VirtualScheduler")
    struct TestSchedulerTests {
        let queue = DispatchQueue(label: "test-scheduler-tests")

        @Test func workDueAtTheSameInstantRunsFirstInFirstOut() {
            let scheduler = VirtualScheduler()
            let order = Locked<[String]>([])
            @Sendable func note(_ label: String) -> @Sendable () -> Void { { order.withLock { $0.append(label) } } }
            _ = scheduler.schedule(after: .seconds(2), on: queue, note("2s a"))
            _ = scheduler.schedule(after: .seconds(1), on: queue, note("1s a"))
            scheduler.execute(on: queue, note("now a"))
            _ = scheduler.schedule(after: .seconds(2), on: queue, note("2s b"))
            _ = scheduler.schedule(after: .seconds(1), on: queue, note("1s b"))
            scheduler.execute(on: queue, note("now b"))
            _ = scheduler.schedule(after: .zero, on: queue, note("now c"))
            scheduler.run()

            #expect(order.withLock { $0 } == ["now a", "now b", "now c", "1s a", "1s b", "2s a", "2s b"])
            #expect(scheduler.now == .seconds(2))
        }

        @Test func advanceRunsOnlyWhatIsDueAndMovesTime() {
            let scheduler = VirtualScheduler(now: .seconds(100))
            let ran = Locked<[Duration]>([])
            for delay in [Duration.milliseconds(10), .milliseconds(30), .milliseconds(20)] {
                _ = scheduler.schedule(after: delay, on: queue) { ran.withLock { $0.append(scheduler.now) } }
            }
            #expect(scheduler.nextDeadline == .seconds(100) + .milliseconds(10))

            scheduler.advance()
            #expect(ran.withLock { $0 }.isEmpty)
            scheduler.advance(by: .milliseconds(20))
            #expect(
                ran.withLock { $0 } == [.seconds(100) + .milliseconds(10), .seconds(100) + .milliseconds(20)],
                "each item sees its own deadline as now")
            #expect(scheduler.now == .seconds(100) + .milliseconds(20))
            #expect(scheduler.pendingCount == 1)
            scheduler.advance(by: .milliseconds(5))
            #expect(scheduler.now == .seconds(100) + .milliseconds(25), "time moves to the target with nothing due")
            scheduler.advance(by: .milliseconds(-50))
            #expect(scheduler.now == .seconds(100) + .milliseconds(25), "a negative advance does not move time back")
            scheduler.run()
            #expect(ran.withLock { $0 }.count == 3)
            #expect(scheduler.pendingCount == 0)
            #expect(scheduler.nextDeadline == nil)
        }

        @Test func workScheduledWhileAdvancingRunsInTheSameCallIfDue() {
            let scheduler = VirtualScheduler()
            let ran = CBCounter()
            scheduler.execute(on: queue) {
                ran.increment()
                scheduler.execute(on: queue) { ran.increment() }
                _ = scheduler.schedule(after: .seconds(1), on: queue) { ran.increment() }
                _ = scheduler.schedule(after: .seconds(5), on: queue) { ran.increment() }
            }
            scheduler.advance(by: .seconds(1))
            #expect(ran.count == 3)
            #expect(scheduler.pendingCount == 1)
        }

        @Test func cancelRemovesTheItemAndReleasesItsWork() {
            let scheduler = VirtualScheduler()
            let ran = CBCounter()
            let probe: CBWeak<CBCanary>
            let token: VirtualScheduler.Token
            do {
                let canary = CBCanary()
                probe = CBWeak(canary)
                token = scheduler.schedule(after: .seconds(1), on: queue) {
                    withExtendedLifetime(canary) {}
                    ran.increment()
                }
            }
            let other = scheduler.schedule(after: .seconds(1), on: queue) { ran.increment() }
            #expect(scheduler.pendingCount == 2)
            token.cancel()
            token.cancel()
            #expect(scheduler.pendingCount == 1)
            #expect(probe.object == nil, "the cancelled work is released at once")
            scheduler.run()
            #expect(ran.count == 1)
            other.cancel()  // after it ran: harmless
            #expect(scheduler.pendingCount == 0)
        }

        @Test func negativeDelaysAreDueNow() {
            let scheduler = VirtualScheduler()
            let ran = CBCounter()
            _ = scheduler.schedule(after: .seconds(-3), on: queue) { ran.increment() }
            scheduler.advance()
            #expect(ran.count == 1)
            #expect(scheduler.now == .zero)
        }

        @Test func schedulingFromManyThreadsWhileAdvancing() async {
            let scheduler = VirtualScheduler()
            let ran = CBCounter()
            let producers = 4
            let perProducer = 2_000
            let produced = CBCounter()
            for _ in 0..<producers {
                DispatchQueue.global().async {
                    for i in 0..<perProducer {
                        if i % 2 == 0 {
                            scheduler.execute(on: queue) { ran.increment() }
                        } else {
                            _ = scheduler.schedule(after: .milliseconds(i % 7), on: queue) { ran.increment() }
                        }
                    }
                    produced.increment()
                }
            }
            let total = producers * perProducer
            let done = await cbPump(scheduler, jumpingTimers: true) {
                produced.count == producers && ran.count == total
            }
            #expect(done)
            scheduler.run()
            #expect(ran.count == total, "every item ran exactly once")
        }
    }

    @Suite("DispatchTimerScheduler")
    struct DispatchTimerSchedulerTests {
        @Test func firesOnItsQueueAfterTheDelay() async {
            let queue = DispatchQueue(label: "dispatch-timer-tests")
            let key = DispatchSpecificKey<Int>()
            queue.setSpecific(key: key, value: 7)
            let scheduler = DispatchTimerScheduler()
            let start = scheduler.now
            let firedAt = CBSlot<Duration>()
            let onQueue = CBSlot<Bool>()
            let timer = scheduler.schedule(after: .milliseconds(20), on: queue) {
                firedAt.set(scheduler.now)
                onQueue.set(DispatchQueue.getSpecific(key: key) == 7)
            }
            #expect(await cbWait { firedAt.get != nil })
            #expect((firedAt.get ?? .zero) - start >= .milliseconds(20), "never early")
            #expect(onQueue.get == true)
            timer.cancel()  // after firing: harmless
        }

        @Test func cancelledTimerNeverFires() async throws {
            let queue = DispatchQueue(label: "dispatch-timer-tests")
            let scheduler = RetryKit.DispatchTimerScheduler()
            let fired = CBCounter()
            let timer = scheduler.schedule(after: .milliseconds(10), on: queue) { fired.increment() }
            timer.cancel()
            timer.cancel()
            try await Task.sleep(for: .milliseconds(60))
            #expect(fired.count == 0)
        }

        @Test func extremeDelaysNeitherTrapNorFireEarly() async throws {
            let queue = DispatchQueue(label: "dispatch-timer-tests")
            let scheduler: DispatchTimerScheduler = .dispatch
            let fired = CBCounter()
            let huge = [
                Duration.seconds(Int64.max),
                .seconds(BackoffStrategy<ContinuousClock>.saturationLimit.components.seconds),
                Duration(secondsComponent: Int64.max, attosecondsComponent: 999_999_999_999_999_999),
            ]
            let timers = huge.map { delay in scheduler.schedule(after: delay, on: queue) { fired.increment() } }
            let negative = scheduler.schedule(after: .seconds(-5), on: queue) { fired.increment() }
            #expect(await cbWait { fired.count == 1 }, "a negative delay fires at once")
            try await Task.sleep(for: .milliseconds(20))
            #expect(fired.count == 1, "the huge delays did not wrap around")
            timers.forEach { $0.cancel() }
            negative.cancel()
        }

        @Test func nowIsMonotonic() {
            let scheduler = DispatchTimerScheduler()
            var previous = scheduler.now
            for _ in 0..<1_000 {
                let now = scheduler.now
                #expect(now >= previous)
                previous = now
            }
            #expect(previous > .zero)
        }
    }
}
