import Dispatch
import RetryKitTesting
import Testing

@testable import RetryKit

/// Real queues, real timers and a condition toggled from other threads: for the thread sanitizer, and to check that
/// every run still ends exactly once.
@Suite("Policies under concurrency", .timeLimit(.minutes(3)))
struct PolicyConcurrencyTests {
    @Test func gatedCallbackRunsWhileTheConditionFlipsFromAnotherThread() async {
        let runs = 200
        let condition = RetryCondition(true)
        let policy = RetryPlan.constantDelay(.milliseconds(1)).onlyWhen(condition)
        let queue = DispatchQueue(label: "flipping", attributes: .concurrent)
        let completions = Locked([Int](repeating: 0, count: runs))
        let values = Locked([Int?](repeating: nil, count: runs))
        for run in 0..<runs {
            policy.execute(
                on: queue,
                operation: { attempt, done in
                    DispatchQueue.global().async {
                        attempt.number < 3 ? done(.failure(CBError(code: run))) : done(.success(run))
                    }
                },
                completion: { result, _ in
                    completions.withLock { $0[run] += 1 }
                    values.withLock { $0[run] = result.cbValue }
                })
        }
        let flipper = Task.detached {
            for flip in 0..<400 {
                condition.value = flip.isMultiple(of: 2)
                if flip.isMultiple(of: 50) { try? await Task.sleep(for: .milliseconds(1)) }
            }
            condition.value = true
        }
        await flipper.value
        #expect(await cbWait(timeout: .seconds(120)) { completions.withLock { $0.allSatisfy { $0 == 1 } } })
        #expect(values.withLock { $0 } == (0..<runs).map { $0 })
        #expect(await cbWait { condition.observerCount == 0 })
        try? await Task.sleep(for: .milliseconds(20))
        #expect(completions.withLock { $0.allSatisfy { $0 == 1 } }, "no second completion")
    }

    @Test func gatedAsyncRunsWhileTheConditionFlipsFromAnotherTask() async throws {
        let runs = 100
        let condition = RetryCondition(true)
        let policy = RetryPlan.constantDelay(.milliseconds(1)).onlyWhen(condition)
        let flipper = Task.detached {
            for flip in 0..<400 {
                condition.value = flip.isMultiple(of: 2)
                if flip.isMultiple(of: 50) { try? await Task.sleep(for: .milliseconds(1)) }
            }
            condition.value = true
        }
        let sum = try await withThrowingTaskGroup(of: Int.self) { group in
            for run in 0..<runs {
                group.addTask {
                    try await policy.execute { attempt in
                        await Task.yield()
                        if attempt.number < 3 { throw CBError(code: run) }
                        return run
                    }
                }
            }
            return try await group.reduce(0, +)
        }
        await flipper.value
        #expect(sum == (0..<runs).reduce(0, +))
        #expect(condition.observerCount == 0)
    }

    @Test func repeatingOnRealTimersThenCancel() async {
        let values = CBCounter()
        let errors = Locked<[any Error]>([])
        let handle = RetryPlan.noDelay.repeating(withDelay: .milliseconds(2)).execute(
            on: DispatchQueue(label: "real-repeat"),
            operation: { _, done in DispatchQueue.global().async { done(.success(1)) } },
            onValue: { _ in values.increment() },
            completion: { error in errors.withLock { $0.append(error) } })
        #expect(await cbWait { values.count >= 5 })
        handle.cancel()
        #expect(await cbWait { errors.withLock { $0.count } == 1 })
        let stopped = values.count
        try? await Task.sleep(for: .milliseconds(30))
        #expect(values.count <= stopped + 1, "at most a value already on its way")
        #expect(errors.withLock { $0.count } == 1 && errors.withLock { $0.first } is CancellationError)
    }

    @Test func cancellingGatedRunsFromManyThreads() async {
        let runs = 300
        let condition = RetryCondition(false)
        let policy = RetryPlan.noDelay.onlyWhen(condition)
        let queue = DispatchQueue(label: "cancel-gated", attributes: .concurrent)
        let completions = CBCounter()
        let handles = (0..<runs).map { run in
            policy.execute(
                on: queue,
                operation: { (_: RetryAttempt, done: AttemptCompletion<Int>) in
                    DispatchQueue.global().async { done(.success(run)) }
                }, completion: { _, _ in completions.increment() })
        }
        DispatchQueue.concurrentPerform(iterations: runs) { index in
            if index.isMultiple(of: 3) { condition.value = index.isMultiple(of: 2) }
            handles[index].cancel()
        }
        #expect(await cbWait { completions.count == runs })
        #expect(await cbWait { condition.observerCount == 0 })
    }
}
