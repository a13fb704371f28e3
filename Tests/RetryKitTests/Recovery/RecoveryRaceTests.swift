import Dispatch
import RetryKit
import RetryKitTesting
import Testing

/// Real threads: retriers that fail, wait, get cancelled and retry while the refresh ends on another thread.
@Suite("Recovery: races on real queues", .timeLimit(.minutes(2)))
struct RecoveryRaceTests {
    /// Cancels a random third of `handles` from another thread, at once or a little later; returns how many. Keeps no
    /// handle once the cancels have run.
    func cancelSome(
        of handles: [RetryHandle<String>], server: TokenServer, using generator: inout SeededRandomNumberGenerator
    ) -> Int {
        let cancelled = handles.filter { _ in generator.below(3) == 0 }
        let spin = generator.below(2_000)
        DispatchQueue.global().async {
            for _ in 0..<spin { _ = server.validToken }
            for handle in cancelled { handle.cancel() }
        }
        return cancelled.count
    }

    @Test func cancelsRacingTheRefreshCompleteEveryRetrierOnceAndReleaseEverything() async throws {
        for round in 0..<20 {
            let server = TokenServer()
            server.expire()
            let refreshes = CBCounter()
            let refreshQueue = DispatchQueue(label: "refresh")
            let recovery = RetryRecovery<String>(
                credential: "t1", when: { $0 is Unauthorized },
                refresh: { _, completion in
                    refreshes.increment()
                    refreshQueue.async { completion(.success(server.validToken)) }
                })
            let plan = RetryPlan.constantDelay(.zero).giveUpAfter(maxAttempts: 3).recovering(with: recovery)
            var generator = SeededRandomNumberGenerator(seed: UInt64(round))
            let count = 100
            let completions = (0..<count).map { _ in CBCounter() }
            let outcomes = Locked<[String]>([])
            var probes: [CallbackRunnerProbe] = []
            var handles: [RetryHandle<String>] = []
            for index in 0..<count {
                let queue = DispatchQueue(label: "race-\(index % 4)")
                let handle = plan.execute(
                    on: queue,
                    operation: { token, _, done in
                        DispatchQueue.global().async { done(server.call(token)) }
                    },
                    completion: { result, _ in
                        completions[index].increment()
                        outcomes.withLock {
                            switch result {
                            case .success: $0.append("ok")
                            case .failure(let error): $0.append(error is CancellationError ? "cancelled" : "\(error)")
                            }
                        }
                    })
                probes.append(handle.runner.probe)
                handles.append(handle)
            }
            let cancelled = cancelSome(of: handles, server: server, using: &generator)
            for handle in handles { _ = try? await handle.value }
            handles = []
            #expect(completions.allSatisfy { $0.count == 1 }, "round \(round): every completion ran exactly once")
            let seen = outcomes.withLock { $0 }
            #expect(seen.allSatisfy { $0 == "ok" || $0 == "cancelled" }, "round \(round): \(Set(seen))")
            #expect(seen.filter { $0 == "ok" }.count >= count - cancelled)
            #expect(refreshes.count == 1, "round \(round): one refresh")
            #expect(recovery.core.waitingCount == 0, "round \(round): nobody is left waiting")
            // A runner is released once its completion has run and its last hop has returned.
            for probe in probes {
                var spins = 0
                while probe.object != nil && spins < 1_000 {
                    spins += 1
                    try await Task.sleep(for: .milliseconds(1))
                }
                #expect(probe.object == nil, "round \(round): a finished retrier is released")
            }
        }
    }
}
