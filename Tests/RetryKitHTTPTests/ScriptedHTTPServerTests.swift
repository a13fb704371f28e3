import Foundation
import RetryKitHTTP
import RetryKitTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
#if canImport(Glibc)
    import Glibc
#endif

/// The scripted server over real loopback sockets, with plain URLSession (no retries involved).
///
/// Serialized so that the tests that count time and file descriptors do not compete with each other.
@Suite(.serialized, .timeLimit(.minutes(3))) struct ScriptedHTTPServerTests {
    @Test func scriptedStatusesArriveInOrderAndTheLastStepRepeats() async throws {
        let server = try ScriptedHTTPServer()
        defer { server.stop() }
        server.script("/flaky", [.respond(503), .respond(503), .respond(200, body: "ok")])
        let session = makeSession()
        defer { session.finishTasksAndInvalidate() }

        var statuses: [Int?] = []
        for _ in 0..<4 {
            statuses.append(await fetch(server.url("/flaky"), in: session).status)
        }
        #expect(statuses == [503, 503, 200, 200])

        let recorded = server.requests(to: "/flaky")
        #expect(recorded.count == 4)
        #expect(recorded.allSatisfy { $0.method == "GET" && $0.target == "/flaky" })
        #expect(zip(recorded, recorded.dropFirst()).allSatisfy { $0.receivedAt <= $1.receivedAt })
        #expect(server.requestCount(to: "/flaky") == 4)
        #expect(server.requests.count == 4)
    }

    @Test func bodiesHeadersAndUnscriptedPaths() async throws {
        let server = try ScriptedHTTPServer(scripts: [
            "/items": [.respond(201, headers: ["X-Step": "one"], body: "created")],
            "/empty": [],
        ])
        defer { server.stop() }
        server.script("/once", [.respond(200, body: "first")], whenExhausted: .notFound)
        let session = makeSession()
        defer { session.finishTasksAndInvalidate() }

        let created = await fetch(server.url("/items?page=2"), in: session)
        #expect(created.status == 201)
        #expect(created.body == "created")
        if case .response(let response, _) = created {
            #expect(response.value(forHTTPHeaderField: "X-Step") == "one")
        }
        #expect(server.requests(to: "/items").first?.target == "/items?page=2")

        #expect(await fetch(server.url("/nowhere"), in: session).status == 404)
        #expect(await fetch(server.url("/empty"), in: session).status == 404)
        #expect(await fetch(server.url("/once"), in: session).body == "first")
        #expect(await fetch(server.url("/once"), in: session).status == 404)
        #expect(server.requestCount(to: "/nowhere") == 1)
    }

    @Test func requestMethodHeadersAndBodyAreRecorded() async throws {
        let server = try ScriptedHTTPServer(scripts: ["/orders": [.respond(202)]])
        defer { server.stop() }
        let session = makeSession()
        defer { session.finishTasksAndInvalidate() }

        var request = makeRequest("POST", url: server.url("/orders"), headers: ["Idempotency-Key": "abc-123"])
        request.httpBody = Data("hello".utf8)
        #expect(await fetch(request, in: session).status == 202)

        // A body large enough for clients that send `Expect: 100-continue`.
        let large = Data(repeating: 0x61, count: 1_500_000)
        request.httpBody = large
        #expect(await fetch(request, in: session).status == 202)

        let recorded = server.requests(to: "/orders")
        #expect(recorded.count == 2)
        #expect(recorded.first?.method == "POST")
        #expect(recorded.first?.value(forHeader: "idempotency-key") == "abc-123")
        #expect(recorded.first?.body == Data("hello".utf8))
        #expect(recorded.last?.body == large)
    }

    @Test func headRequestsGetNoBody() async throws {
        let server = try ScriptedHTTPServer(scripts: ["/head": [.respond(200, body: "not sent for HEAD")]])
        defer { server.stop() }
        let session = makeSession()
        defer { session.finishTasksAndInvalidate() }

        let fetched = await fetch(makeRequest("HEAD", url: server.url("/head")), in: session)
        #expect(fetched.status == 200)
        #expect(fetched.body == "")
    }

    @Test func retryAfterRoundTripsInBothForms() async throws {
        let server = try ScriptedHTTPServer(scripts: [
            "/limited": [
                .respond(429, headers: ["Retry-After": "1"]),
                .respond(503, headers: ["Retry-After": "Sun, 06 Nov 1994 08:49:37 GMT"]),
            ]
        ])
        defer { server.stop() }
        let session = makeSession()
        defer { session.finishTasksAndInvalidate() }
        let now = Date(timeIntervalSince1970: 784_111_777 - 30)  // 30 s before the date above

        guard case .response(let first, _) = await fetch(server.url("/limited"), in: session),
            case .response(let second, _) = await fetch(server.url("/limited"), in: session)
        else {
            Issue.record("expected two responses")
            return
        }
        #expect(first.statusCode == 429)
        #expect(first.value(forHTTPHeaderField: "Retry-After") == "1")
        #expect(RetryAfter.delay(in: first, now: now) == .seconds(1))
        #expect(second.statusCode == 503)
        #expect(RetryAfter.delay(in: second, now: now) == .seconds(30))

        let policy = HTTPRetryPolicy()
        let request = makeRequest(url: server.url("/limited"))
        #expect(StrategyKind(policy.decision(for: request, response: first, now: now)) == .retryAfter(.seconds(1)))
        #expect(StrategyKind(policy.decision(for: request, response: second, now: now)) == .retryAfter(.seconds(30)))
    }

    @Test func resetIsReportedAsNetworkConnectionLost() async throws {
        let server = try ScriptedHTTPServer(scripts: ["/reset": [.reset, .respond(200)]])
        defer { server.stop() }
        let session = makeSession()
        defer { session.finishTasksAndInvalidate() }

        let fetched = await fetch(server.url("/reset"), in: session)
        if ClosedConnectionRequests.mayResend && fetched.status == 200 {
            // Apple's URLSession resent the GET on its own after the reset, and got the script's next step.
            #expect(server.requestCount(to: "/reset") == 2)
        } else {
            let code = try #require(fetched.urlErrorCode)
            #expect(TransportErrorCodes.reset.contains(code), "\(code)")
            #expect(await fetch(server.url("/reset"), in: session).status == 200)
        }
        #expect(HTTPRetryPolicy().retryableTransportFailures.contains(.networkConnectionLost))
    }

    @Test func closeWithoutReplyIsReportedAsARetryableTransportError() async throws {
        let server = try ScriptedHTTPServer(scripts: ["/close": [.closeWithoutReply.delayed(by: .milliseconds(20))]])
        defer { server.stop() }
        let session = makeSession()
        defer { session.finishTasksAndInvalidate() }

        let fetched = await fetch(server.url("/close"), in: session)
        // badServerResponse on Linux; Apple's URLSession may say networkConnectionLost. Both are retried by default.
        let code = try #require(fetched.urlErrorCode)
        #expect(TransportErrorCodes.closedWithoutReply.contains(code), "\(code)")
        #expect(HTTPRetryPolicy().retryableTransportFailures.contains(TransportFailure(code)))
        #expect(ClosedConnectionRequests.range(attempts: 1).contains(server.requestCount(to: "/close")))
    }

    @Test func refusingPortIsReportedAsCannotConnectToHost() async throws {
        let refusing = try RefusingPort()
        defer { refusing.close() }
        let session = makeSession()
        defer { session.finishTasksAndInvalidate() }

        let fetched = await fetch(refusing.url("/anything"), in: session)
        #expect(fetched.urlErrorCode == .cannotConnectToHost)
        #expect(refusing.port > 0)
    }

    @Test func neverAnswerTimesOutOnTheClient() async throws {
        let server = try ScriptedHTTPServer(scripts: ["/hang": [.neverAnswer]])
        defer { server.stop() }
        let session = makeSession()
        defer { session.finishTasksAndInvalidate() }

        let start = ContinuousClock.now
        let fetched = await fetch(server.url("/hang"), in: session, timeout: 1)
        let elapsed = ContinuousClock.now - start
        #expect(fetched.urlErrorCode == .timedOut)
        #expect(elapsed >= .milliseconds(900))
        #expect(server.requestCount(to: "/hang") == 1)
    }

    @Test func aDelayedResponseWaitsItsDelay() async throws {
        let server = try ScriptedHTTPServer(scripts: ["/slow": [.respond(200, body: "late", after: .milliseconds(200))]]
        )
        defer { server.stop() }
        let session = makeSession()
        defer { session.finishTasksAndInvalidate() }

        let start = ContinuousClock.now
        let fetched = await fetch(server.url("/slow"), in: session)
        #expect(fetched.body == "late")
        #expect(ContinuousClock.now - start >= .milliseconds(200))
    }

    @Test func twoHundredConcurrentRequestsAreAllAnswered() async throws {
        let server = try ScriptedHTTPServer(scripts: ["/many": [.respond(200, body: "x", after: .milliseconds(20))]])
        defer { server.stop() }
        let session = makeSession(timeout: 60, connectionsPerHost: 64)
        defer { session.finishTasksAndInvalidate() }

        let url = server.url("/many")
        let statuses = await withTaskGroup(of: Int?.self) { group in
            for _ in 0..<200 {
                group.addTask { await fetch(url, in: session).status }
            }
            var statuses: [Int?] = []
            for await status in group { statuses.append(status) }
            return statuses
        }
        #expect(statuses.count == 200)
        #expect(statuses.allSatisfy { $0 == 200 })
        #expect(server.requestCount(to: "/many") == 200)
    }

    @Test func stopReturnsPromptlyWithConnectionsOpenAndThenRefuses() async throws {
        let server = try ScriptedHTTPServer(scripts: [
            "/hang": [.neverAnswer],
            "/slow": [.respond(200, after: .seconds(60))],
        ])
        let session = makeSession(timeout: 60)
        defer { session.invalidateAndCancel() }

        let hang = Task { await fetch(server.url("/hang"), in: session) }
        let slow = Task { await fetch(server.url("/slow"), in: session) }
        #expect(await eventually { server.requests.count == 2 })

        let start = ContinuousClock.now
        server.stop()
        let stopping = ContinuousClock.now - start
        #expect(stopping < promptBound)  // it does not wait for the server's threads
        server.stop()  // idempotent

        // The clients see their connections end instead of waiting a minute.
        let results = [await hang.value, await slow.value]
        #expect(results.allSatisfy { $0.status == nil })
        #expect(ContinuousClock.now - start < promptBound)
        await server.stopped()

        let after = await fetch(server.url("/hang"), in: session)
        #expect(after.urlErrorCode == .cannotConnectToHost)
    }

    @Test func deinitStopsTheServer() async throws {
        var server: ScriptedHTTPServer? = try ScriptedHTTPServer(scripts: ["/ok": [.respond(200)]])
        weak let weakServer = server
        let url = try #require(server?.url("/ok"))
        let session = makeSession()
        defer { session.finishTasksAndInvalidate() }
        #expect(await fetch(url, in: session).status == 200)

        server = nil
        #expect(weakServer == nil)
        #expect(await fetch(url, in: session).urlErrorCode == .cannotConnectToHost)
    }

    #if os(Linux)
        @Test func stoppingLeaksNoFileDescriptors() async throws {
            // Warm up anything that allocates descriptors lazily (Dispatch, Foundation) before counting.
            try await cycleOnce()
            let before = openDescriptorCount()
            for _ in 0..<30 {
                try await cycleOnce()
            }
            let after = openDescriptorCount()
            // A leak of one descriptor per cycle would add 30; allow a little noise from the rest of the process.
            #expect(after - before < 10, "descriptors before: \(before), after: \(after)")
        }

        @Test func rawProtocolDetails() async throws {
            let server = try ScriptedHTTPServer(scripts: ["/echo": [.respond(200, body: "fine")]])
            defer { server.stop() }
            let port = server.port

            // A chunked body is de-chunked; Expect: 100-continue gets its interim response first.
            let reply = try #require(
                await RawClient.exchange(
                    port: port,
                    "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n"
                        + "5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nTrailer: t\r\n\r\n"))
            #expect(reply.hasPrefix("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n"))
            #expect(reply.contains("Content-Length: 4\r\n") && reply.contains("Connection: close\r\n"))
            #expect(reply.hasSuffix("\r\n\r\nfine"))
            #expect(server.requests(to: "/echo").first?.body == Data("hello, world".utf8))

            // Malformed requests get 400 and are not recorded.
            for garbage in [
                "NONSENSE\r\n\r\n", "GET /echo HTTP/1.1\r\nNo colon here\r\n\r\n",
                "GET /echo HTTP/1.1\r\nContent-Length: -3\r\n\r\n",
            ] {
                let answer = await RawClient.exchange(port: port, garbage)
                #expect(answer?.hasPrefix("HTTP/1.1 400 Bad Request\r\n") == true, "\(garbage)")
            }
            #expect(server.requests.count == 1)

            // A client that connects and leaves without a request costs nothing and records nothing.
            #expect(await RawClient.exchange(port: port, nil) != nil)
            #expect(server.requests.count == 1)
        }

        @Test func headerNamesAndValuesCannotSplitTheResponse() async throws {
            // Issue 13.9: a CR LF pair is one `Character`, so a check per Character let it through as it was.
            let server = try ScriptedHTTPServer(scripts: [
                "/split": [
                    .respond(
                        200,
                        headers: [
                            "X-Pair": "a\r\nSet-Cookie: evil=1", "X-LF": "b\nX-Evil: 2", "X-CR": "c\rX-Evil: 3",
                            "X-Name\r\nX-Evil": "4", "X-Blank": "\r\n\r\n<html>injected body", "X-Nul": "e\0f",
                        ], body: "ok")
                ]
            ])
            defer { server.stop() }
            let reply = try #require(
                await RawClient.exchangeBytes(port: server.port, "GET /split HTTP/1.1\r\nHost: localhost\r\n\r\n"))

            // The head ends at the first empty line; everything after it is the scripted body.
            let separator: [UInt8] = Array("\r\n\r\n".utf8)
            try #require(reply.count >= separator.count, "no response")
            let end = try #require(
                (0...(reply.count - separator.count)).first { Array(reply[$0..<$0 + separator.count]) == separator })
            #expect(Array(reply[(end + separator.count)...]) == Array("ok".utf8))
            let head = Array(reply[..<end])
            // Every CR in the head is the start of a CR LF line ending, every LF the end of one; no NUL.
            for (index, byte) in head.enumerated() {
                if byte == 0x0D { #expect(index + 1 < head.count && head[index + 1] == 0x0A, "bare CR at \(index)") }
                if byte == 0x0A { #expect(index > 0 && head[index - 1] == 0x0D, "bare LF at \(index)") }
                #expect(byte != 0, "NUL at \(index)")
            }
            let lines = String(decoding: head, as: UTF8.self).components(separatedBy: "\r\n")
            #expect(lines.first == "HTTP/1.1 200 OK")
            #expect(
                lines.dropFirst().sorted() == [
                    "Connection: close", "Content-Length: 2", "X-Blank:     <html>injected body", "X-CR: c X-Evil: 3",
                    "X-LF: b X-Evil: 2", "X-Name  X-Evil: 4", "X-Nul: e f", "X-Pair: a  Set-Cookie: evil=1",
                ])
        }

        /// Starts a server, serves one request, leaves one connection hanging and one idle, stops the server and waits
        /// until it has stopped. The blocking socket calls run off the cooperative pool.
        private func cycleOnce() async throws {
            let server = try ScriptedHTTPServer(scripts: ["/hang": [.neverAnswer], "/ok": [.respond(200)]])
            let port = server.port
            let answered = await RawClient.exchange(port: port, "GET /ok HTTP/1.1\r\nHost: localhost\r\n\r\n")
            #expect(answered?.hasPrefix("HTTP/1.1 200 OK") == true)

            let hanging = try RawClient(port: port)
            hanging.send("GET /hang HTTP/1.1\r\nHost: localhost\r\n\r\n")
            let idle = try RawClient(port: port)
            #expect(await eventually { server.requestCount(to: "/hang") == 1 })
            server.stop()
            // Read and closed on the reading thread: the client is never touched from two threads after it started.
            let rest = await offThePool {
                defer { hanging.close() }
                return hanging.readAll()
            }
            #expect(rest == "")  // closed without a reply
            idle.close()
            await server.stopped()
        }

        private func openDescriptorCount() -> Int {
            (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? 0
        }
    #endif
}

#if canImport(Glibc)
    /// A minimal blocking TCP client for the descriptor test, independent of URLSession's connection handling. Its
    /// blocking reads run off the cooperative pool (``offThePool(_:)``); one thread uses it at a time.
    private final class RawClient: @unchecked Sendable {
        private var fd: Int32

        init(port: Int) throws {
            fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else { throw URLError(.cannotConnectToHost) }
            var timeout = timeval(tv_sec: 60, tv_usec: 0)
            _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port)).bigEndian
            address.sin_addr = in_addr(s_addr: in_addr_t(0x7F00_0001).bigEndian)
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard connected == 0 else {
                Glibc.close(fd)
                throw URLError(.cannotConnectToHost)
            }
        }

        func send(_ text: String) {
            let bytes = Array(text.utf8)
            _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        }

        /// Everything until the server closes (or 10 s pass).
        func readAll() -> String {
            String(decoding: readAllBytes(), as: UTF8.self)
        }

        /// Everything until the server closes (or 10 s pass), as bytes.
        func readAllBytes() -> [UInt8] {
            var result: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if count <= 0 { break }
                result += buffer[0..<count]
            }
            return result
        }

        func close() {
            if fd >= 0 { Glibc.close(fd) }
            fd = -1
        }

        /// Connects to `port`, sends `request` and reads everything until the server closes, on a thread of its own;
        /// without a request, connects and leaves. `nil` if the connection fails.
        static func exchangeBytes(port: Int, _ request: String?) async -> [UInt8]? {
            await offThePool {
                guard let client = try? RawClient(port: port) else { return nil }
                defer { client.close() }
                guard let request else { return [] }
                client.send(request)
                return client.readAllBytes()
            }
        }

        /// ``exchangeBytes(port:_:)`` as text.
        static func exchange(port: Int, _ request: String?) async -> String? {
            await exchangeBytes(port: port, request).map { String(decoding: $0, as: UTF8.self) }
        }
    }
#endif
