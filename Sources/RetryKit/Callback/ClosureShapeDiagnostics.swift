import Dispatch

// Overloads that exist only to reject a closure of the wrong shape with a message that names the entry point taking
// that shape: the completion-handler entry points take `{ attempt, done in … }`, their `…Task` siblings an `async`
// `{ attempt in … }`, `withRetry` a completion-handler operation from async code. Without them the compiler reports
// the mismatch inside the closure ("invalid conversion from throwing function…", "expects 1 argument, but 2 were
// used"). They are never chosen for a call that compiles otherwise: the compiler picks an unavailable overload only
// when no available one fits. Tests/CompileFail/ checks each message.

/// Unavailable: an `async` operation given to the completion-handler `retry(on:)`.
@available(
    *, unavailable,
    message:
        "retry(on:) takes `{ attempt, done in … }`, which calls `done` with the result; an async `{ attempt in try await … }` runs with retryTask(on:)"
)
@discardableResult
public func retry<Value: Sendable>(
    maxAttempts: Int = 3, totalTimeout: Duration? = nil, attemptTimeout: Duration? = nil, budget: RetryBudget? = nil,
    on queue: DispatchQueue, scheduler: any RetryScheduler = .dispatch,
    isolation: isolated (any Actor)? = #isolation,
    operation: @escaping @Sendable (_ attempt: RetryAttempt) async throws -> Value,
    strategy: @escaping (any Error) -> RetryStrategy<ContinuousClock> = { _ in .backoff(.none) },
    observer: ((RetryEvent<Value>) -> Void)? = nil,
    completion: @escaping (Result<Value, any Error>, RetrySummary) -> Void
) -> RetryHandle<Value> {
    retryTask(
        maxAttempts: maxAttempts, totalTimeout: totalTimeout, attemptTimeout: attemptTimeout, budget: budget, on: queue,
        scheduler: scheduler, operation: operation, strategy: strategy, observer: observer, completion: completion)
}

/// Unavailable: a completion-handler operation given to `retryTask(on:)`.
@available(
    *, unavailable,
    message:
        "retryTask(on:) takes an async `{ attempt in try await … }`; an operation that calls `done` runs with retry(on:)"
)
@discardableResult
public func retryTask<Value: Sendable>(
    maxAttempts: Int = 3, totalTimeout: Duration? = nil, attemptTimeout: Duration? = nil, budget: RetryBudget? = nil,
    on queue: DispatchQueue, scheduler: any RetryScheduler = .dispatch,
    isolation: isolated (any Actor)? = #isolation,
    operation: @escaping (_ attempt: RetryAttempt, _ done: AttemptCompletion<Value>) -> Void,
    strategy: @escaping (any Error) -> RetryStrategy<ContinuousClock> = { _ in .backoff(.none) },
    observer: ((RetryEvent<Value>) -> Void)? = nil,
    completion: @escaping (Result<Value, any Error>, RetrySummary) -> Void
) -> RetryHandle<Value> {
    retry(
        maxAttempts: maxAttempts, totalTimeout: totalTimeout, attemptTimeout: attemptTimeout, budget: budget, on: queue,
        scheduler: scheduler, operation: operation, strategy: strategy, observer: observer, completion: completion)
}

extension RetryPlan {
    /// Unavailable: an `async` operation given to the completion-handler `execute(on:)`.
    @available(
        *, unavailable,
        message:
            "execute(on:) takes `{ attempt, done in … }`, which calls `done` with the result; an async `{ attempt in try await … }` runs with executeTask(on:)"
    )
    @discardableResult
    public func execute<Value: Sendable>(
        on queue: DispatchQueue, scheduler: any RetryScheduler = .dispatch,
        isolation: isolated (any Actor)? = #isolation,
        operation: @escaping @Sendable (_ attempt: RetryAttempt) async throws -> Value,
        observer: ((RetryEvent<Value>) -> Void)? = nil,
        completion: @escaping (Result<Value, any Error>, RetrySummary) -> Void
    ) -> RetryHandle<Value> {
        executeTask(on: queue, scheduler: scheduler, operation: operation, observer: observer, completion: completion)
    }

    /// Unavailable: a completion-handler operation given to `executeTask(on:)`.
    @available(
        *, unavailable,
        message:
            "executeTask(on:) takes an async `{ attempt in try await … }`; an operation that calls `done` runs with execute(on:)"
    )
    @discardableResult
    public func executeTask<Value: Sendable>(
        on queue: DispatchQueue, scheduler: any RetryScheduler = .dispatch,
        isolation: isolated (any Actor)? = #isolation,
        operation: @escaping (_ attempt: RetryAttempt, _ done: AttemptCompletion<Value>) -> Void,
        observer: ((RetryEvent<Value>) -> Void)? = nil,
        completion: @escaping (Result<Value, any Error>, RetrySummary) -> Void
    ) -> RetryHandle<Value> {
        execute(on: queue, scheduler: scheduler, operation: operation, observer: observer, completion: completion)
    }
}

/// Unavailable: an `async` operation given to `withRetry`, whose operation calls a completion handler.
@available(
    *, unavailable,
    message:
        "withRetry's operation calls `done`: `{ attempt, done in … }`; an async operation runs with the async retry: `try await retry { try await … }`"
)
public func withRetry<Value: Sendable>(
    maxAttempts: Int = 3, totalTimeout: Duration? = nil, attemptTimeout: Duration? = nil, budget: RetryBudget? = nil,
    tolerance: Duration? = nil, isolation: isolated (any Actor)? = #isolation,
    operation: (_ attempt: RetryAttempt) async throws -> Value,
    strategy: @Sendable (any Error) -> RetryStrategy<ContinuousClock> = { _ in .backoff(.none) },
    observer: (@Sendable (RetryEvent<Value>) -> Void)? = nil
) async throws -> Value {
    try await operation(RetryAttempt(number: 1, maxAttempts: maxAttempts, elapsed: .zero))
}

/// Unavailable: an `async` operation without an attempt parameter given to `withRetry`.
@available(
    *, unavailable,
    message:
        "withRetry's operation calls `done`: `{ attempt, done in … }`; an async operation runs with the async retry: `try await retry { try await … }`"
)
public func withRetry<Value: Sendable>(
    maxAttempts: Int = 3, totalTimeout: Duration? = nil, attemptTimeout: Duration? = nil, budget: RetryBudget? = nil,
    tolerance: Duration? = nil, isolation: isolated (any Actor)? = #isolation,
    operation: () async throws -> Value,
    strategy: @Sendable (any Error) -> RetryStrategy<ContinuousClock> = { _ in .backoff(.none) },
    observer: (@Sendable (RetryEvent<Value>) -> Void)? = nil
) async throws -> Value {
    try await operation()
}
