import Dispatch
import Foundation
import RetryKit

/// A tiny HTTP/1.1 server on 127.0.0.1 that answers each request path from a script, for testing HTTP retry
/// configurations over real sockets.
///
/// The server binds the loopback interface only, on a port the kernel chooses, and starts serving as soon as it is
/// created. Each path has a script: a list of ``Step``s consumed in order, one per request. A step either responds
/// (status, headers, body, optionally after a delay) or injects a fault: a connection reset, a close without a reply,
/// or a request that is never answered. Every request is recorded with its arrival time so tests can assert how
/// often and how far apart a client retried.
///
/// ```swift
/// let server = try ScriptedHTTPServer()
/// server.script("/flaky", [
///     .respond(503, headers: ["Retry-After": "1"]),
///     .reset,
///     .respond(200, body: "ok"),
/// ])
/// let (data, response) = try await URLSession.shared.data(from: server.url("/flaky"))  // 503
/// // ... the client retries ...
/// #expect(server.requests(to: "/flaky").count == 3)
/// server.stop()
/// ```
///
/// ## Scripts
///
/// - Requests are matched by path, without the query string: `/items?page=2` uses the script of `/items`.
/// - When a script runs out, what happens depends on ``Exhaustion``: by default (``Exhaustion/repeatLast``) the last
///   step repeats for every further request, so `[.respond(503), .respond(200)]` answers 503 once and 200 forever.
///   An empty script, and a path without a script, answer `404 Not Found`.
/// - Setting a script for a path replaces the old one and starts it from its first step; recorded requests are kept.
///
/// ## Bearer tokens
///
/// ``requireBearerToken(on:refreshPath:)`` makes paths answer 401 unless the request carries the current token
/// (`Authorization: Bearer token-N`); ``expireToken()`` invalidates it, and the next valid token is the one a refresh
/// issues (a request to the refresh path, or ``refreshToken()``), counted by ``tokenRefreshes``.
///
/// ## Connections
///
/// Each connection is served on its own thread and carries one request: every response says `Connection: close`
/// and the server closes the connection after it. A request body is read in full (`Content-Length` or chunked);
/// `Expect: 100-continue` is answered. A response to `HEAD`, and a 1xx, 204 or 304 response, carries no body.
///
/// ## Stopping
///
/// ``stop()`` interrupts every wait (delays, `neverAnswer`, reads and writes) and closes the listening socket, so that
/// new connections are refused, and returns at once, without blocking the calling thread (a thread of Swift's
/// cooperative pool, say): the server's threads close their connections and end on their own, and the last one to end
/// releases the server's descriptors. ``stopped()`` waits for that. `stop()` is idempotent and is called by `deinit`, so
/// a server that goes out of scope never leaks its threads or file descriptors.
///
/// All methods are thread-safe.
public final class ScriptedHTTPServer: Sendable {
    /// The TCP port the server listens on, on 127.0.0.1.
    package let port: Int
    /// `http://127.0.0.1:<port>`.
    package let baseURL: URL

    private let core: ServerCore

    /// Starts a server on 127.0.0.1 with an ephemeral port.
    ///
    /// - Parameter scripts: Initial scripts by path; add more at any time with ``script(_:_:whenExhausted:)``.
    /// - Throws: ``SocketError`` if a socket, the bind or the listen fails.
    public init(scripts: [String: [Step]] = [:]) throws {
        let core = try ServerCore()
        guard let url = URL(string: "http://127.0.0.1:\(core.port)") else {
            core.stop()
            throw SocketError(operation: "url", code: 0)
        }
        self.core = core
        self.port = core.port
        self.baseURL = url
        for (path, steps) in scripts {
            script(path, steps)
        }
        core.startAccepting()
    }

    deinit {
        core.stop()
    }

    /// The URL of `path` on this server, for example `server.url("/items?page=2")`.
    ///
    /// A `path` without a leading slash gets one.
    public func url(_ path: String) -> URL {
        let absolute = path.hasPrefix("/") ? path : "/" + path
        return URL(string: baseURL.absoluteString + absolute) ?? baseURL.appendingPathComponent(path)
    }

    /// Sets the script for `path`, replacing any earlier one; the next request to `path` gets `steps[0]`.
    ///
    /// - Parameters:
    ///   - path: The request path to match, without a query string, for example `"/flaky"`.
    ///   - steps: The steps, consumed one per request, in order.
    ///   - whenExhausted: What further requests get once every step was used: the last step again (the default) or a
    ///     fixed step.
    public func script(_ path: String, _ steps: [Step], whenExhausted: Exhaustion = .repeatLast) {
        core.setScript(Script(steps: steps, whenExhausted: whenExhausted), for: path)
    }

    /// Every request received so far, in arrival order.
    package var requests: [RecordedRequest] {
        core.state.withLock { $0.requests }
    }

    /// The requests received so far for `path` (matched without the query string), in arrival order.
    public func requests(to path: String) -> [RecordedRequest] {
        core.state.withLock { state in state.requests.filter { $0.path == path } }
    }

    /// The number of requests received so far for `path`.
    public func requestCount(to path: String) -> Int {
        core.state.withLock { state in state.requests.reduce(0) { $0 + ($1.path == path ? 1 : 0) } }
    }

    /// Stops the server: interrupts all waits and closes the listening socket (new connections are refused), then
    /// returns at once; the server's threads close their connections and end shortly after (see ``stopped()``).
    ///
    /// Clients with a request in flight see the connection close. Safe to call more than once and from any thread,
    /// a thread of the cooperative pool included: it never waits for the server's threads.
    public func stop() {
        core.stop()
    }

    /// Stops the server if it is not stopped yet, and suspends until all of its threads have finished and its
    /// descriptors are closed. A thread that never finished (which would be a bug) would keep this waiting: call it
    /// from a test with a time limit.
    public func stopped() async {
        core.stop()
        await core.waitForThreads()
    }
}

// MARK: - Bearer tokens

extension ScriptedHTTPServer {
    /// Makes `paths` answer `401 Unauthorized` (with `WWW-Authenticate: Bearer`) to every request that does not carry
    /// `Authorization: Bearer <current token>`; a request that does gets its path's script as usual. Returns the current
    /// token.
    ///
    /// Tokens are `token-1`, `token-2`, … in the order they are issued; the first is issued by this call (a later call
    /// changes the paths and keeps the token). ``expireToken()`` makes the current token invalid; the next valid token is
    /// the one a refresh issues: a request to `refreshPath` (any method) answers `200` with the new token as its body,
    /// or ``refreshToken()`` from the test. ``tokenRefreshes`` counts them.
    ///
    /// ```swift
    /// let server = try ScriptedHTTPServer()
    /// server.script("/items", [.respond(200, body: "items")])
    /// let first = server.requireBearerToken(on: ["/items"], refreshPath: "/auth/refresh")   // "token-1"
    /// server.expireToken()              // "token-1" now gets 401
    /// // a client refreshes: POST /auth/refresh → 200 "token-2", then retries with it
    /// #expect(server.tokenRefreshes == 1)
    /// ```
    ///
    /// - Parameters:
    ///   - paths: The paths that require the token (matched without the query string).
    ///   - refreshPath: The path of the refresh endpoint; `nil` (the default) for none.
    /// - Returns: The current token.
    @discardableResult
    public func requireBearerToken(on paths: Set<String>, refreshPath: String? = nil) -> String {
        core.state.withLock { state in
            var tokens = state.tokens ?? TokenAuthority()
            tokens.protectedPaths = paths
            tokens.refreshPath = refreshPath
            if tokens.current == nil { tokens.issue(countingRefresh: false) }
            state.tokens = tokens
            return tokens.current ?? ""
        }
    }

    /// Makes the current token invalid: from now on the protected paths answer 401 to it, and to every request, until a
    /// refresh issues the next token.
    public func expireToken() {
        core.state.withLock { $0.tokens?.current = nil }
    }

    /// Issues the next token, as a request to the refresh endpoint does, and counts it in ``tokenRefreshes``.
    ///
    /// - Returns: The new current token.
    @discardableResult
    public func refreshToken() -> String {
        core.state.withLock { state in
            var tokens = state.tokens ?? TokenAuthority()
            tokens.issue(countingRefresh: true)
            state.tokens = tokens
            return tokens.current ?? ""
        }
    }

    /// Makes the refresh endpoint answer `step` instead of issuing a token (`nil`, the default, to issue tokens again).
    /// Its requests are still recorded; ``tokenRefreshes`` counts only the tokens issued.
    ///
    /// - Parameter step: What the refresh endpoint answers, `.respond(500)` say; `nil` to issue tokens.
    public func failRefreshes(with step: Step?) {
        core.state.withLock { state in
            var tokens = state.tokens ?? TokenAuthority()
            tokens.refreshFailure = step
            state.tokens = tokens
        }
    }

    /// The token the protected paths accept now; `nil` after ``expireToken()`` until the next refresh, or before
    /// ``requireBearerToken(on:refreshPath:)``.
    public var currentToken: String? {
        core.state.withLock { $0.tokens?.current }
    }

    /// How many tokens refreshes have issued (the refresh endpoint and ``refreshToken()``); the first token does not
    /// count.
    public var tokenRefreshes: Int {
        core.state.withLock { $0.tokens?.refreshes ?? 0 }
    }
}

/// The bearer tokens of a ``ScriptedHTTPServer``: which paths need one, which one is valid, how many were issued.
struct TokenAuthority: Sendable {
    var protectedPaths: Set<String> = []
    var refreshPath: String?
    var current: String?
    var issued = 0
    var refreshes = 0
    var refreshFailure: ScriptedHTTPServer.Step?

    mutating func issue(countingRefresh: Bool) {
        issued += 1
        current = "token-\(issued)"
        if countingRefresh { refreshes += 1 }
    }

    /// The answer to `request` if the tokens decide it (a refresh, or a protected path without the valid token); `nil`
    /// to answer it from its path's script.
    mutating func answer(_ request: ScriptedHTTPServer.RecordedRequest) -> ScriptedHTTPServer.Step? {
        if request.path == refreshPath {
            if let refreshFailure { return refreshFailure }
            issue(countingRefresh: true)
            return .respond(200, headers: ["Content-Type": "text/plain"], body: current ?? "")
        }
        guard protectedPaths.contains(request.path) else { return nil }
        if let current, request.value(forHeader: "Authorization") == "Bearer \(current)" { return nil }
        return .respond(401, headers: ["WWW-Authenticate": "Bearer"], body: "invalid or expired token")
    }
}

// MARK: - Steps and scripts

extension ScriptedHTTPServer {
    /// What the server does with one request: respond, or inject a fault.
    ///
    /// Every step reads the whole request first, then waits its delay (zero unless set with `after:` or
    /// ``delayed(by:)``), then acts.
    public struct Step: Sendable {
        enum Action: Sendable {
            case respond(status: Int, headers: [String: String], body: Data)
            case reset
            case closeWithoutReply
            case neverAnswer
        }

        let action: Action
        /// How long the server waits after reading the request before it acts.
        package let delay: Duration

        init(_ action: Action, delay: Duration = .zero) {
            self.action = action
            self.delay = delay
        }

        /// Responds with `status`, `headers` and a body.
        ///
        /// - Parameters:
        ///   - status: A three-digit status code.
        ///   - headers: Extra header fields. `Content-Length` and `Connection: close` are added unless given. Every
        ///     carriage return, line feed and NUL in a name or value is written as a space, so a header can never
        ///     split the response or add header lines of its own (`"a\r\nSet-Cookie: x"` is sent as one field whose
        ///     value is `"a  Set-Cookie: x"`).
        ///   - body: The body bytes.
        ///   - delay: How long to wait before responding.
        public static func respond(
            _ status: Int, headers: [String: String] = [:], body: Data, after delay: Duration = .zero
        ) -> Step {
            Step(.respond(status: status, headers: headers, body: body), delay: delay)
        }

        /// Responds with `status`, `headers` and a UTF-8 text body.
        ///
        /// Carriage returns, line feeds and NULs in header names and values are written as spaces, as in the
        /// form that takes `Data`.
        ///
        /// ```swift
        /// .respond(429, headers: ["Retry-After": "1"])
        /// .respond(200, body: "ok", after: .milliseconds(50))
        /// ```
        public static func respond(
            _ status: Int, headers: [String: String] = [:], body: String = "", after delay: Duration = .zero
        ) -> Step {
            Step(.respond(status: status, headers: headers, body: Data(body.utf8)), delay: delay)
        }

        /// Resets the connection (a TCP RST, via `SO_LINGER` 0) instead of responding.
        ///
        /// URLSession reports this as `URLError.networkConnectionLost` (-1005) on Linux.
        public static var reset: Step { Step(.reset) }

        /// Closes the connection gracefully without sending any response.
        ///
        /// URLSession reports this as `URLError.badServerResponse` (-1011) on Linux.
        public static var closeWithoutReply: Step { Step(.closeWithoutReply) }

        /// Never responds: the connection stays open until the client closes it or the server stops.
        ///
        /// The client sees its own timeout, `URLError.timedOut` (-1001) with URLSession.
        public static var neverAnswer: Step { Step(.neverAnswer) }

        /// This step, acting only after `delay` (replacing any earlier delay).
        ///
        /// ```swift
        /// .reset.delayed(by: .milliseconds(200))
        /// ```
        public func delayed(by delay: Duration) -> Step {
            Step(action, delay: delay)
        }
    }

    /// What a script answers once all its steps were used.
    public enum Exhaustion: Sendable {
        /// The last step repeats for every further request (an empty script answers 404).
        case repeatLast
        /// This step answers every further request.
        case fallback(Step)

        /// `404 Not Found` for every further request.
        package static var notFound: Exhaustion { .fallback(.respond(404)) }
    }

    /// One request the server received.
    public struct RecordedRequest: Sendable {
        /// The request method, as sent, for example `"GET"`.
        public let method: String
        /// The request target as sent, including any query, for example `"/items?page=2"`.
        public let target: String
        /// The path part of the target, without query or fragment: the key scripts are matched by.
        public let path: String
        /// The header fields in the order received.
        public let headers: [(name: String, value: String)]
        /// The request body (empty if none), de-chunked if it was sent chunked.
        public let body: Data
        /// When the server had read the whole request.
        public let receivedAt: ContinuousClock.Instant

        /// The value of the first header field named `name`, compared case-insensitively.
        package func value(forHeader name: String) -> String? {
            headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
        }
    }

    /// A socket call that failed while starting the server, with the C `errno`.
    public struct SocketError: Error, Sendable, CustomStringConvertible {
        /// The failing call, for example `"bind"`.
        package let operation: String
        /// The `errno` value it left.
        package let code: Int32

        public var description: String { "ScriptedHTTPServer: \(operation) failed (errno \(code))" }
    }
}

struct Script: Sendable {
    var steps: [ScriptedHTTPServer.Step]
    var whenExhausted: ScriptedHTTPServer.Exhaustion
    var next = 0

    init(steps: [ScriptedHTTPServer.Step], whenExhausted: ScriptedHTTPServer.Exhaustion) {
        self.steps = steps
        self.whenExhausted = whenExhausted
    }

    /// The step for the next request, advancing the script.
    mutating func take() -> ScriptedHTTPServer.Step {
        if next < steps.count {
            next += 1
            return steps[next - 1]
        }
        switch whenExhausted {
        case .fallback(let step): return step
        case .repeatLast: return steps.last ?? .respond(404, body: "empty script")
        }
    }
}

// MARK: - The server's shared state and threads

/// Everything the server's threads share. Threads retain the core, never the ``ScriptedHTTPServer``, so the server's
/// `deinit` can stop them.
final class ServerCore: Sendable {
    struct State: Sendable {
        var scripts: [String: Script] = [:]
        var requests: [ScriptedHTTPServer.RecordedRequest] = []
        /// The bearer tokens of ``ScriptedHTTPServer/requireBearerToken(on:refreshPath:)``; `nil` until it is called.
        var tokens: TokenAuthority?
        var stopRequested = false
        var descriptorsClosed = false
        /// The callers of ``ServerCore/waitForThreads()`` waiting for the descriptors to close.
        var stopWaiters: [CheckedContinuation<Void, Never>] = []
    }

    static let headLimit = 64 * 1024
    static let bodyLimit = 64 * 1024 * 1024

    let port: Int
    let state = Locked(State())
    private let listenFD: Int32
    private let stopRead: Int32
    private let stopWrite: Int32
    /// Joins the accept thread and every connection thread: `enter` before a thread starts, `leave` when it ends.
    private let threads = DispatchGroup()

    init() throws {
        let pipe = try LoopbackSocket.makePipe()
        let fd: Int32
        do {
            fd = try LoopbackSocket.makeStreamSocket()
        } catch {
            LoopbackSocket.close(pipe.read)
            LoopbackSocket.close(pipe.write)
            throw error
        }
        do {
            port = try LoopbackSocket.bindLoopbackEphemeral(fd)
            try LoopbackSocket.listen(fd, backlog: 512)
        } catch {
            LoopbackSocket.close(fd)
            LoopbackSocket.close(pipe.read)
            LoopbackSocket.close(pipe.write)
            throw error
        }
        LoopbackSocket.setNonBlocking(fd)
        listenFD = fd
        stopRead = pipe.read
        stopWrite = pipe.write
    }

    func startAccepting() {
        spawn { core in core.acceptLoop() }
    }

    func setScript(_ script: Script, for path: String) {
        state.withLock { $0.scripts[path] = script }
    }

    /// Signals every thread to stop and closes the listening socket; never waits. Once every thread has ended, the
    /// descriptors the threads share are closed (not before: a thread may still use their numbers) and the callers of
    /// ``waitForThreads()`` resume.
    func stop() {
        let first = state.withLock { state in
            defer { state.stopRequested = true }
            return !state.stopRequested
        }
        guard first else { return }
        LoopbackSocket.signal(stopWrite)
        LoopbackSocket.retire(listenFD)  // refuses new connections now; the number stays taken until the close below
        threads.notify(queue: .global()) { [self] in
            LoopbackSocket.close(listenFD)
            LoopbackSocket.close(stopRead)
            LoopbackSocket.close(stopWrite)
            let waiters = state.withLock { state in
                state.descriptorsClosed = true
                defer { state.stopWaiters = [] }
                return state.stopWaiters
            }
            for waiter in waiters { waiter.resume() }
        }
    }

    /// Suspends until the threads have ended and the descriptors are closed, after ``stop()``.
    func waitForThreads() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let closed = state.withLock { state in
                if !state.descriptorsClosed { state.stopWaiters.append(continuation) }
                return state.descriptorsClosed
            }
            if closed { continuation.resume() }
        }
    }

    /// Runs `body` on a new thread that `stop()` joins.
    private func spawn(_ body: @escaping @Sendable (ServerCore) -> Void) {
        threads.enter()
        let thread = Thread { [self] in
            body(self)
            threads.leave()
        }
        thread.stackSize = 512 * 1024
        thread.start()
    }

    private func acceptLoop() {
        while true {
            switch LoopbackSocket.wait(for: listenFD, stop: stopRead, timeoutMilliseconds: -1) {
            case .stopped: return
            case .timedOut: continue
            case .ready: break
            }
            acceptPending: while true {
                switch LoopbackSocket.accept(listenFD) {
                case .accepted(let client):
                    if state.withLock({ $0.stopRequested }) {
                        LoopbackSocket.close(client)
                        return
                    }
                    spawn { core in core.serve(client) }
                case .nonePending:
                    break acceptPending
                case .failed:
                    // Out of descriptors or similar: pause instead of spinning on a listener that stays readable.
                    if case .stopped = LoopbackSocket.wait(for: -1, stop: stopRead, timeoutMilliseconds: 10) { return }
                    break acceptPending
                }
            }
        }
    }

    // MARK: One connection

    /// Serves one connection. This is the only place a connection's descriptor is closed, exactly once, whatever
    /// happened: the descriptor number could otherwise be reused by another thread in between and closed under it.
    private func serve(_ fd: Int32) {
        defer { LoopbackSocket.close(fd) }
        LoopbackSocket.setNonBlocking(fd)
        LoopbackSocket.setNoDelay(fd)
        var stream = ConnectionStream(fd: fd, stop: stopRead)
        guard let (head, body) = readRequest(&stream) else { return }
        let request = ScriptedHTTPServer.RecordedRequest(
            method: head.method, target: head.target, path: head.path, headers: head.headers, body: Data(body),
            receivedAt: .now)
        let step = state.withLock { state in
            state.requests.append(request)
            if let answer = state.tokens?.answer(request) { return answer }
            guard var script = state.scripts[request.path] else {
                return ScriptedHTTPServer.Step.respond(404, body: "no script for \(request.path)")
            }
            let step = script.take()
            state.scripts[request.path] = script
            return step
        }
        perform(step, method: head.method, on: &stream)
    }

    /// Reads one request; answers malformed or oversized ones itself and returns `nil` for them.
    private func readRequest(_ stream: inout ConnectionStream) -> (RequestHead, [UInt8])? {
        var tooLarge = false
        guard let bytes = stream.readHead(limit: Self.headLimit, tooLarge: &tooLarge) else {
            if tooLarge { reply(431, on: &stream) }
            return nil
        }
        guard let head = RequestHead(bytes) else {
            reply(400, on: &stream)
            return nil
        }
        if head.value("Expect")?.caseInsensitiveCompare("100-continue") == .orderedSame {
            guard stream.write(Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)) else { return nil }
        }
        let chunked = head.value("Transfer-Encoding")?.lowercased().hasSuffix("chunked") ?? false
        if chunked {
            guard let body = readChunkedBody(&stream) else {
                reply(400, on: &stream)
                return nil
            }
            return (head, body)
        }
        guard let lengthText = head.value("Content-Length") else { return (head, []) }
        guard let length = Int(lengthText), length >= 0 else {
            reply(400, on: &stream)
            return nil
        }
        guard length <= Self.bodyLimit else {
            reply(413, on: &stream)
            return nil
        }
        guard let body = stream.read(count: length) else { return nil }
        return (head, body)
    }

    private func readChunkedBody(_ stream: inout ConnectionStream) -> [UInt8]? {
        var body: [UInt8] = []
        while true {
            guard let line = stream.readLine(limit: 1024) else { return nil }
            let sizeText = line.split(separator: ";", maxSplits: 1).first.map(String.init) ?? ""
            guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16), size >= 0,
                size <= Self.bodyLimit - body.count
            else { return nil }
            if size == 0 {
                // Trailer fields, up to the empty line.
                while true {
                    guard let trailer = stream.readLine(limit: Self.headLimit) else { return nil }
                    if trailer.isEmpty { return body }
                }
            }
            guard let chunk = stream.read(count: size), stream.readLine(limit: 2) == "" else { return nil }
            body += chunk
        }
    }

    private func perform(_ step: ScriptedHTTPServer.Step, method: String, on stream: inout ConnectionStream) {
        if step.delay > .zero {
            guard
                case .timedOut = LoopbackSocket.wait(
                    for: -1, stop: stopRead, timeoutMilliseconds: Self.milliseconds(step.delay))
            else { return }  // stopped while waiting
        }
        switch step.action {
        case .respond(let status, let headers, let body):
            let bytes = ResponseWriter.bytes(status: status, headers: headers, body: body, forHEAD: method == "HEAD")
            finish(bytes, on: &stream)
        case .reset:
            LoopbackSocket.setLingerZero(stream.fd)  // the close in `serve` now sends a reset
        case .closeWithoutReply:
            LoopbackSocket.shutdownWrite(stream.fd)
            stream.drain(timeoutMilliseconds: 500)
        case .neverAnswer:
            stream.drain(timeoutMilliseconds: -1)
        }
    }

    private func reply(_ status: Int, on stream: inout ConnectionStream) {
        finish(ResponseWriter.bytes(status: status, headers: [:], body: Data(), forHEAD: false), on: &stream)
    }

    /// Writes a response, half-closes, and waits briefly for the client to close so that unread input never turns the
    /// close into a reset that could destroy the response in flight.
    private func finish(_ bytes: [UInt8], on stream: inout ConnectionStream) {
        guard stream.write(bytes) else { return }
        LoopbackSocket.shutdownWrite(stream.fd)
        stream.drain(timeoutMilliseconds: 500)
    }

    /// `d` in whole milliseconds for `poll`, rounded up and clamped to `Int32`.
    static func milliseconds(_ d: Duration) -> Int32 {
        // Compared before reading `components`, which traps beyond `Int64` seconds.
        guard d > .zero else { return 0 }
        guard d < .seconds(Int64(Int32.max / 1000)) else { return Int32.max }
        let parts = d.components
        let millis = parts.seconds * 1000 + (parts.attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return Int32(millis)
    }
}

// MARK: - A port that refuses connections

/// A loopback port on which every connection attempt is refused, for "connection refused" tests.
///
/// The port is bound (so no other socket can take it while this value lives) but never listens, so the kernel
/// answers every connection attempt with a reset: URLSession reports `URLError.cannotConnectToHost` (-1004).
///
/// ```swift
/// let refusing = try RefusingPort()
/// let request = URLRequest(url: refusing.url("/anything"))
/// ```
///
/// The port is released by ``close()`` or when the value is deinitialized.
public final class RefusingPort: Sendable {
    /// The refusing TCP port on 127.0.0.1.
    package let port: Int
    /// `http://127.0.0.1:<port>`.
    package let baseURL: URL
    private let descriptor: Locked<Int32?>

    /// Reserves a refusing port.
    ///
    /// - Throws: ``ScriptedHTTPServer/SocketError`` if the socket or the bind fails.
    public init() throws {
        let fd = try LoopbackSocket.makeStreamSocket()
        do {
            port = try LoopbackSocket.bindLoopbackEphemeral(fd)
        } catch {
            LoopbackSocket.close(fd)
            throw error
        }
        guard let url = URL(string: "http://127.0.0.1:\(port)") else {
            LoopbackSocket.close(fd)
            throw ScriptedHTTPServer.SocketError(operation: "url", code: 0)
        }
        baseURL = url
        descriptor = Locked(fd)
    }

    deinit {
        close()
    }

    /// The URL of `path` on the refusing port.
    public func url(_ path: String) -> URL {
        let absolute = path.hasPrefix("/") ? path : "/" + path
        return URL(string: baseURL.absoluteString + absolute) ?? baseURL.appendingPathComponent(path)
    }

    /// Releases the port. Idempotent.
    public func close() {
        let fd = descriptor.withLock { fd in
            defer { fd = nil }
            return fd
        }
        if let fd { LoopbackSocket.close(fd) }
    }
}
