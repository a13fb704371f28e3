import Dispatch
import RetryKit
import RetryKitTesting
import Testing

extension CallbackRunnerTests {
    /// Races on real Dispatch: cancels against results, timers and task cancellation. Each checks exactly-once completion
    /// for every retrier. Sized to stay within a few seconds under the thread sanitizer.
    @Suite("Callback stress")
    struct CallbackStressTests {
        /// What one attempt does in the big stress test.
        enum Behaviour: CaseIterable {
            case failAtOnce, succeedAtOnce, failFromAnotherThread, succeedLater, hang
            /// Calls back before returning, and again from another thread, racing the operation's return and the
            /// runner's handling of the first result (kept by the attempt's record until the operation returns).
            case failAtOnceAndAgainElsewhere
        }

        @Test func tenThousandRetriersWithRandomCancelsRacingResultsAndTimers() async {
            let count = 10_000
            // Seven serial queues and one concurrent queue: on a concurrent queue the runner's blocks race each other
            // (events may interleave), but the completion must still run exactly once.
            let queues =
                (0..<7).map { DispatchQueue(label: "callback-stress-\($0)") }
                + [DispatchQueue(label: "callback-stress-concurrent", attributes: .concurrent)]
            // Results arrive and cancels come from other threads: two "network" queues and a canceller.
            let network = ["a", "b"].map { DispatchQueue(label: "callback-stress-network-\($0)") }
            let cancelQueue = DispatchQueue(label: "callback-stress-cancel")
            let completions = Locked([Int](repeating: 0, count: count))
            let outcomes = Locked([RetryError.Reason?](repeating: nil, count: count))
            let total = CBCounter()
            let operationCalls = CBCounter()
            var runners: [CallbackRunnerProbe] = []
            runners.reserveCapacity(count)

            for index in 0..<count {
                var rng = SeededRandomNumberGenerator(seed: UInt64(index) &* 0x9E37)
                let hasAttemptTimeout = rng.below(3) == 0
                let script = (0..<3).map { _ in
                    var behaviour = Behaviour.allCases[rng.below(Behaviour.allCases.count)]
                    if behaviour == .hang && !hasAttemptTimeout { behaviour = .succeedLater }
                    return behaviour
                }
                let delayMicroseconds = [0, 0, 50, 300, 1_000][rng.below(5)]
                let handle: RetryHandle<Int> = retry(
                    maxAttempts: 3, attemptTimeout: hasAttemptTimeout ? .microseconds(500 + rng.below(1_000)) : nil,
                    on: queues[index % queues.count],
                    operation: { attempt, done in
                        operationCalls.increment()
                        switch script[min(attempt.number, 3) - 1] {
                        case .failAtOnce:
                            done(.failure(CBError(code: attempt.number)))
                        case .succeedAtOnce:
                            done(.success(index))
                        case .failFromAnotherThread:
                            network[index % 2].async { done(.failure(CBError(code: attempt.number))) }
                        case .succeedLater:
                            network[(index + 1) % 2].asyncAfter(deadline: .now() + .microseconds(200)) {
                                done(.success(index))
                            }
                        case .hang:
                            break
                        case .failAtOnceAndAgainElsewhere:
                            done(.failure(CBError(code: attempt.number)))
                            network[index % 2].async { done(.success(index)) }  // a duplicate: never the result
                        }
                    },
                    strategy: { _ in .backoff(.constant(.microseconds(delayMicroseconds))) },
                    completion: { result, summary in
                        completions.withLock { $0[index] += 1 }
                        outcomes.withLock { $0[index] = summary.reason }
                        if case .success(let value) = result, value != index {
                            Issue.record("retrier \(index) got another retrier's value \(value)")
                        }
                        total.increment()
                    })
                runners.append(handle.runner.probe)
                switch rng.below(4) {
                case 0:
                    handle.cancel()  // at once, racing the first hop
                case 1:
                    cancelQueue.asyncAfter(deadline: .now() + .microseconds(rng.below(3_000))) { handle.cancel() }
                default:
                    break  // runs to the end
                }
            }

            #expect(await cbWait(timeout: .seconds(120)) { total.count >= count }, "every retrier completed")
            try? await Task.sleep(for: .milliseconds(50))  // room for any second completion to show up
            let counts = completions.withLock { $0 }
            #expect(
                counts.allSatisfy { $0 == 1 },
                "exactly once: \(counts.enumerated().filter { $0.element != 1 }.prefix(5))")
            let reasons = outcomes.withLock { $0 }
            #expect(reasons.contains(.cancelled))
            #expect(reasons.contains(.succeeded))
            #expect(reasons.contains(.exhausted))
            #expect(operationCalls.count <= 3 * count)
            #expect(
                await cbWait(timeout: .seconds(120)) { runners.allSatisfy { $0.object == nil } },
                "every runner was released (no retain cycle, no timer left behind)")
        }

        @Test func awaitedValueRacingCancellationMatchesTheCompletion() async {
            let iterations = 2_000
            let queue = DispatchQueue(label: "callback-stress-value")
            let mismatches = CBCounter()
            let completions = Locked([Int](repeating: 0, count: iterations))

            // In batches, so that thousands of tasks never flood the cooperative pool that other tests share.
            for batch in stride(from: 0, to: iterations, by: 200) {
                await withTaskGroup(of: Void.self) { group in
                    for index in batch..<min(batch + 200, iterations) {
                        var rng = SeededRandomNumberGenerator(seed: UInt64(index) &+ 77)
                        let completionResult = CBSlot<Result<Int, any Error>>()
                        let finishLater = rng.below(2) == 0
                        let handle = retry(
                            on: queue,
                            operation: { attempt, done in
                                if finishLater {
                                    DispatchQueue.global().async { done(.success(index)) }
                                } else if attempt.number == 1 {
                                    done(.failure(CBError(code: 1)))
                                } else {
                                    done(.success(index))
                                }
                            },
                            completion: { result, _ in
                                completionResult.set(result)
                                completions.withLock { $0[index] += 1 }
                            })
                        let awaiter = Task { try await handle.value }
                        let cancelAfter = rng.below(3)
                        group.addTask {
                            if cancelAfter > 0 { await Task.yield() }
                            if cancelAfter > 1 { await Task.yield() }
                            awaiter.cancel()
                            let awaited = await awaiter.result
                            // Both ends must agree: the value or CancellationError, whichever won.
                            guard let completed = completionResult.get else {
                                mismatches.increment()
                                return
                            }
                            switch (awaited, completed) {
                            case (.success(let a), .success(let b)) where a == b && a == index: break
                            case (.failure(let a), .failure(let b))
                            where a is CancellationError && b is CancellationError:
                                break
                            default: mismatches.increment()
                            }
                        }
                    }
                }
            }
            try? await Task.sleep(for: .milliseconds(20))
            #expect(mismatches.count == 0)
            #expect(completions.withLock { $0 }.allSatisfy { $0 == 1 })
        }

        @Test func asyncOperationRacingHandleCancel() async {
            let iterations = 2_000
            let queue = DispatchQueue(label: "callback-stress-async")
            let cancelQueue = DispatchQueue(label: "callback-stress-async-cancel", attributes: .concurrent)
            let completions = Locked([Int](repeating: 0, count: iterations))
            let wrong = CBCounter()
            let total = CBCounter()
            let running = CBCounter()
            let ended = CBCounter()

            // In batches, so that thousands of tasks never flood the cooperative pool that other tests share.
            for batch in stride(from: 0, to: iterations, by: 200) {
                for index in batch..<min(batch + 200, iterations) {
                    var rng = SeededRandomNumberGenerator(seed: UInt64(index) &+ 1_000)
                    let sleep = rng.below(400)
                    let handle = retryTask(
                        maxAttempts: 2, on: queue,
                        operation: { attempt in
                            running.increment()
                            defer { ended.increment() }
                            if sleep > 0 { try await Task.sleep(for: .microseconds(sleep)) }
                            if attempt.number == 1 && index % 3 == 0 { throw CBError(code: 1) }
                            return index
                        },
                        completion: { result, _ in
                            completions.withLock { $0[index] += 1 }
                            switch result {
                            case .success(let value) where value == index: break
                            case .failure(let error) where error is CancellationError: break
                            default: wrong.increment()
                            }
                            total.increment()
                        })
                    cancelQueue.asyncAfter(deadline: .now() + .microseconds(rng.below(400))) { handle.cancel() }
                }
                _ = await cbWait(timeout: .seconds(120)) { total.count >= min(batch + 200, iterations) }
            }
            #expect(await cbWait(timeout: .seconds(120)) { total.count >= iterations })
            #expect(await cbWait(timeout: .seconds(120)) { ended.count == running.count }, "every attempt's task ended")
            try? await Task.sleep(for: .milliseconds(20))
            #expect(completions.withLock { $0 }.allSatisfy { $0 == 1 })
            #expect(wrong.count == 0)
        }
    }
}
