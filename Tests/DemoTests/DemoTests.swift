import RetryKitTesting
import Testing

@testable import retrykit_demo

@Suite("retrykit-demo: command line", .timeLimit(.minutes(3)))
struct DemoParseTests {
    private func options(_ arguments: [String]) -> RetryKitDemo.Options? {
        guard case .success(.run(let options)) = RetryKitDemo.parse(arguments) else { return nil }
        return options
    }

    private func error(_ arguments: [String]) -> String? {
        guard case .failure(let error) = RetryKitDemo.parse(arguments) else { return nil }
        return error.message
    }

    @Test func noArgumentsRunsEveryScenarioWithTheDefaults() {
        #expect(options([]) == RetryKitDemo.Options())
        #expect(options([])?.scenarios == [.legacy, .bridged, .http, .cancel, .refresh])
        #expect(options([])?.maxAttempts == 4)
        #expect(options([])?.baseDelay == .milliseconds(100))
    }

    @Test func flagsTakeTheirValueAfterASpaceOrAnEqualsSign() {
        for arguments in [
            ["--max-attempts", "2", "--base-delay-ms", "0"],
            ["--max-attempts=2", "--base-delay-ms=0"],
            ["--max-attempts=2", "--base-delay-ms", "0"],
        ] {
            let parsed = options(arguments)
            #expect(parsed?.maxAttempts == 2, "\(arguments)")
            #expect(parsed?.baseDelay == .zero, "\(arguments)")
        }
        #expect(options(["--max-attempts=100"])?.maxAttempts == 100)
        #expect(options(["--base-delay-ms=5000"])?.baseDelay == .seconds(5))
    }

    @Test func scenariosRunOnceEachInTheirUsualOrder() {
        #expect(options(["cancel", "--max-attempts", "2", "legacy"])?.scenarios == [.legacy, .cancel])
        #expect(options(["http", "http"])?.scenarios == [.http])
    }

    @Test func scenarioFlagChoosesAScenarioLikeItsPlainName() {
        #expect(options(["--scenario", "refresh"])?.scenarios == [.refresh])
        #expect(options(["--scenario=refresh", "legacy"])?.scenarios == [.legacy, .refresh])
        #expect(error(["--scenario", "nope"]) == "unknown scenario 'nope'")
        #expect(error(["--scenario"]) == "--scenario takes a scenario's name")
    }

    @Test func helpWinsWhereverItIs() {
        #expect(RetryKitDemo.parse(["--help"]) == .success(.help))
        #expect(RetryKitDemo.parse(["legacy", "-h", "--max-attempts=0"]) == .success(.help))
        for scenario in RetryKitDemo.Scenario.allCases {
            #expect(RetryKitDemo.usage.contains(scenario.rawValue))
        }
        for flag in ["--scenario", "--max-attempts", "--base-delay-ms", "--help"] {
            #expect(RetryKitDemo.usage.contains(flag))
        }
    }

    @Test func badFlagsAndValuesAreOneLineErrorsNotTraps() {
        let bad: [([String], String)] = [
            (["--max-attempts", "0"], "--max-attempts takes a whole number from 1 to 100, not '0'"),
            (["--max-attempts=101"], "--max-attempts takes a whole number from 1 to 100, not '101'"),
            (["--max-attempts"], "--max-attempts takes a whole number from 1 to 100"),
            (["--max-attempts="], "--max-attempts takes a whole number from 1 to 100, not ''"),
            (
                ["--max-attempts", "99999999999999999999999"],
                "--max-attempts takes a whole number from 1 to 100, not '99999999999999999999999'"
            ),
            (["--base-delay-ms", "x"], "--base-delay-ms takes a whole number from 0 to 5000, not 'x'"),
            (["--base-delay-ms=-1"], "--base-delay-ms takes a whole number from 0 to 5000, not '-1'"),
            (["--base-delay-ms", "5001"], "--base-delay-ms takes a whole number from 0 to 5000, not '5001'"),
            (["nope"], "unknown scenario 'nope'"),
            (["--verbose"], "unknown option '--verbose'"),
            (["--verbose=1"], "unknown option '--verbose'"),
            (["-x"], "unknown option '-x'"),
        ]
        for (arguments, message) in bad {
            #expect(error(arguments) == message, "\(arguments)")
            #expect(error(arguments)?.contains("\n") == false)
        }
    }
}

@Suite("retrykit-demo: runs", .timeLimit(.minutes(3)))
struct DemoRunTests {
    private func run(
        _ scenarios: [RetryKitDemo.Scenario], maxAttempts: Int, baseDelay: Duration = .zero
    ) async throws {
        let server = try ScriptedHTTPServer()
        defer { server.stop() }
        let options = RetryKitDemo.Options(scenarios: scenarios, maxAttempts: maxAttempts, baseDelay: baseDelay)
        let demo = Demo(server: server, options: options)
        // The scenarios use distinct paths, so they run side by side: the test takes as long as the longest one
        // (http's Retry-After: 1), not their sum.
        await withTaskGroup(of: (RetryKitDemo.Scenario, Outcome).self) { group in
            for scenario in scenarios {
                group.addTask { (scenario, await demo.run(scenario)) }
            }
            for await (scenario, outcome) in group {
                let expected = demo.expectedOutcome(of: scenario)
                #expect(outcome == expected, "\(scenario.rawValue), max attempts \(maxAttempts)")
            }
        }
    }

    @Test func theExpectedOutcomesFollowTheFlags() {
        func expected(_ scenario: RetryKitDemo.Scenario, _ maxAttempts: Int) -> Outcome {
            Demo.expectedOutcome(of: scenario, maxAttempts: maxAttempts)
        }
        #expect(expected(.legacy, 4) == Outcome(ending: .succeeded, requests: 3))
        #expect(expected(.bridged, 3) == Outcome(ending: .succeeded, requests: 3))
        #expect(expected(.http, 2) == Outcome(ending: .gaveUp, requests: 2))
        #expect(expected(.legacy, 1) == Outcome(ending: .gaveUp, requests: 1))
        #expect(expected(.cancel, 2) == Outcome(ending: .cancelled, requests: 1))
        #expect(expected(.cancel, 1) == Outcome(ending: .gaveUp, requests: 1))
    }

    @Test func everyScenarioSucceedsOrIsCancelledWithTheDefaultAttempts() async throws {
        try await run(RetryKitDemo.Scenario.allCases, maxAttempts: 4)
    }

    @Test func twoAttemptsGiveUpOnTheFlakyEndpoints() async throws {
        try await run([.legacy, .bridged, .http], maxAttempts: 2)
    }

    @Test func oneAttemptLeavesNothingToCancel() async throws {
        try await run([.legacy, .cancel], maxAttempts: 1)
    }

    @Test func theRefreshScenarioPrintsOneLineWithTheCountsItMeasured() async throws {
        let server = try ScriptedHTTPServer()
        defer { server.stop() }
        let demo = Demo(server: server, options: RetryKitDemo.Options(scenarios: [.refresh]))
        let counts = await demo.refresh(RetryKitDemo.Scenario.refresh.path)
        #expect(counts.line == "refresh: requests=100 succeeded=100 refreshes=1")
        #expect(counts.accepted == 100)
        #expect(counts.outcome == demo.expectedOutcome(of: .refresh))
        #expect(server.tokenRefreshes == 1)
    }

    @Test func theRefreshScenarioWithOneAttemptGivesUpWithoutARefresh() async throws {
        let server = try ScriptedHTTPServer()
        defer { server.stop() }
        let demo = Demo(server: server, options: RetryKitDemo.Options(scenarios: [.refresh], maxAttempts: 1))
        let counts = await demo.refresh(RetryKitDemo.Scenario.refresh.path)
        #expect(counts.line == "refresh: requests=100 succeeded=0 refreshes=0")
        #expect(counts.outcome == demo.expectedOutcome(of: .refresh))
    }

    @Test func theWholeRunReportsItsExitStatus() async {
        let options = RetryKitDemo.Options(scenarios: [.legacy, .bridged], maxAttempts: 2, baseDelay: .zero)
        #expect(await RetryKitDemo.run(options) == RetryKitDemo.ExitStatus.expected)
    }
}
