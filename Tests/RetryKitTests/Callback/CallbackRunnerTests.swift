import Testing

/// The completion-handler runner's suites, nested here so that they run one after another: the stress tests load both
/// cores (for seconds under the thread sanitizer) and would otherwise stretch the real-timer tests' latencies. The time
/// limit turns a hang (a completion that never comes, an await that never returns) into a failure.
@Suite("Callback runner", .serialized, .timeLimit(.minutes(1)))
struct CallbackRunnerTests {}
