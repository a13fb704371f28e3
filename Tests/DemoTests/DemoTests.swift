import RetryKitTesting
import Testing

@testable import retrykit_demo

@Suite("retrykit-demo")
struct DemoTests {
    @Test func everyScenarioEndsAsExpected() async throws {
        let server = try ScriptedHTTPServer()
        defer { server.stop() }
        let clock = ContinuousClock()
        let started = clock.now
        let demo = Demo(server: server, options: RetryKitDemo.Options())
        for scenario in RetryKitDemo.Scenario.allCases {
            #expect(await demo.run(scenario), "scenario \(scenario.rawValue)")
        }
        #expect(started.duration(to: clock.now) < .seconds(10))
    }

    @Test func optionsAreParsedAndBadOnesAreReportedNotTrapped() {
        guard case .success(let options) = RetryKitDemo.parse(["cancel", "--max-attempts", "2"]) else {
            Issue.record("valid arguments rejected")
            return
        }
        #expect(options.scenarios == [.cancel])
        #expect(options.maxAttempts == 2)
        for bad in [["--max-attempts", "0"], ["--max-attempts"], ["--base-delay-ms", "x"], ["nope"]] {
            guard case .failure(let error) = RetryKitDemo.parse(bad) else {
                Issue.record("accepted \(bad)")
                continue
            }
            #expect(error.message != nil)
        }
        guard case .failure(let help) = RetryKitDemo.parse(["--help"]) else {
            Issue.record("--help not recognised")
            return
        }
        #expect(help.message == nil)
    }
}
