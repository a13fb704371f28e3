#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The thin layer over BSD sockets that ``ScriptedHTTPServer`` and ``RefusingPort`` use: IPv4 loopback only, every
/// descriptor close-on-exec, non-blocking where the server needs it, and no `SIGPIPE` on writes.
///
/// Nothing here traps: every failing call becomes a ``ScriptedHTTPServer/SocketError`` or a result value. On platforms
/// without Glibc or Darwin sockets, starting a server throws.
enum LoopbackSocket {
    /// What ``wait(for:readable:stop:timeoutMilliseconds:)`` saw.
    enum Readiness {
        case ready
        case stopped
        case timedOut
    }

    /// The result of one non-blocking accept.
    enum AcceptResult {
        case accepted(Int32)
        /// No connection is pending.
        case nonePending
        /// Accepting failed, for example because the process ran out of descriptors.
        case failed
    }

    /// The result of one non-blocking read.
    enum ReadResult {
        case bytes(Int)
        case endOfStream
        case wouldBlock
        case failed
    }
}

#if canImport(Glibc) || canImport(Darwin)
    extension LoopbackSocket {
        /// A new IPv4 stream socket, close-on-exec.
        static func makeStreamSocket() throws -> Int32 {
            #if canImport(Glibc)
                let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            #else
                let fd = socket(AF_INET, SOCK_STREAM, 0)
            #endif
            guard fd >= 0 else { throw ScriptedHTTPServer.SocketError(operation: "socket", code: errno) }
            #if canImport(Darwin)
                _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
                var on: Int32 = 1
                _ = setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &on, socklen_t(MemoryLayout<Int32>.size))
            #endif
            return fd
        }

        /// Binds `fd` to 127.0.0.1 on an ephemeral port and returns the port the kernel chose.
        static func bindLoopbackEphemeral(_ fd: Int32) throws -> Int {
            var address = sockaddr_in()
            #if canImport(Darwin)
                address.sin_len = UInt8(MemoryLayout<sockaddr_in>.size)
            #endif
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = 0
            address.sin_addr = in_addr(s_addr: in_addr_t(0x7F00_0001).bigEndian)  // 127.0.0.1
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard bound == 0 else { throw ScriptedHTTPServer.SocketError(operation: "bind", code: errno) }

            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let named = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
            }
            guard named == 0 else { throw ScriptedHTTPServer.SocketError(operation: "getsockname", code: errno) }
            return Int(UInt16(bigEndian: address.sin_port))
        }

        static func listen(_ fd: Int32, backlog: Int32) throws {
            guard systemListen(fd, backlog) == 0 else {
                throw ScriptedHTTPServer.SocketError(operation: "listen", code: errno)
            }
        }

        /// Accepts one pending connection.
        static func accept(_ fd: Int32) -> AcceptResult {
            while true {
                let client = systemAccept(fd, nil, nil)
                if client >= 0 {
                    _ = fcntl(client, F_SETFD, FD_CLOEXEC)
                    #if canImport(Darwin)
                        var on: Int32 = 1
                        _ = setsockopt(client, SOL_SOCKET, SO_NOSIGPIPE, &on, socklen_t(MemoryLayout<Int32>.size))
                    #endif
                    return .accepted(client)
                }
                if errno == EINTR || errno == ECONNABORTED { continue }
                return errno == EAGAIN || errno == EWOULDBLOCK ? .nonePending : .failed
            }
        }

        static func setNonBlocking(_ fd: Int32) {
            let flags = fcntl(fd, F_GETFL, 0)
            if flags >= 0 { _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK) }
        }

        /// Disables Nagle's algorithm so that small responses leave at once.
        static func setNoDelay(_ fd: Int32) {
            var on: Int32 = 1
            _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
        }

        /// Makes the next `close` send a TCP RST instead of a FIN.
        static func setLingerZero(_ fd: Int32) {
            var option = linger(l_onoff: 1, l_linger: 0)
            _ = setsockopt(fd, SOL_SOCKET, SO_LINGER, &option, socklen_t(MemoryLayout<linger>.size))
        }

        static func shutdownWrite(_ fd: Int32) {
            #if canImport(Glibc)
                _ = shutdown(fd, Int32(SHUT_WR))
            #else
                _ = shutdown(fd, SHUT_WR)
            #endif
        }

        static func close(_ fd: Int32) {
            _ = systemClose(fd)
        }

        /// Closes the socket `fd` refers to at once, so that a listening socket refuses new connections, while keeping
        /// the descriptor number taken (by a fresh unconnected socket, which `accept` and `poll` only fail on) until a
        /// later ``close(_:)``: another thread may still use the number, and must never reach a descriptor some other
        /// code opened meanwhile. Does nothing if no placeholder socket can be made.
        static func retire(_ fd: Int32) {
            guard let placeholder = try? makeStreamSocket() else { return }
            while dup2(placeholder, fd) < 0 && errno == EINTR {}
            close(placeholder)
        }

        /// A pipe whose ends are close-on-exec: the server's stop signal.
        static func makePipe() throws -> (read: Int32, write: Int32) {
            var fds: [Int32] = [-1, -1]
            guard pipe(&fds) == 0 else { throw ScriptedHTTPServer.SocketError(operation: "pipe", code: errno) }
            _ = fcntl(fds[0], F_SETFD, FD_CLOEXEC)
            _ = fcntl(fds[1], F_SETFD, FD_CLOEXEC)
            return (fds[0], fds[1])
        }

        /// Writes one byte to the stop pipe. The byte is never read, so the read end stays readable for good and every
        /// later `poll` on it returns at once.
        static func signal(_ writeEnd: Int32) {
            var byte: UInt8 = 1
            while systemWrite(writeEnd, &byte, 1) < 0 && errno == EINTR {}
        }

        /// Waits until `fd` is readable (or writable), the stop pipe is signalled, or the timeout passes.
        ///
        /// - Parameters:
        ///   - fd: The socket to watch, or `-1` to wait on the stop pipe only.
        ///   - timeoutMilliseconds: `-1` waits without a time limit.
        static func wait(
            for fd: Int32, readable: Bool = true, stop: Int32, timeoutMilliseconds: Int32
        ) -> Readiness {
            var fds = [
                pollfd(fd: stop, events: Int16(POLLIN), revents: 0),
                pollfd(fd: fd, events: Int16(readable ? POLLIN : POLLOUT), revents: 0),
            ]
            let count = fd >= 0 ? 2 : 1
            while true {
                let result = poll(&fds, nfds_t(count), timeoutMilliseconds)
                if result < 0 {
                    if errno == EINTR { continue }
                    return .stopped  // poll itself failed: treat like a stop so that callers close and exit
                }
                if result == 0 { return .timedOut }
                if fds[0].revents != 0 { return .stopped }
                // POLLHUP / POLLERR count as ready: the following read or write reports what happened.
                return .ready
            }
        }

        static func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) -> ReadResult {
            while true {
                let count = recv(fd, buffer.baseAddress, buffer.count, 0)
                if count > 0 { return .bytes(count) }
                if count == 0 { return .endOfStream }
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK { return .wouldBlock }
                return .failed
            }
        }

        /// Sends as much of `bytes` as the socket accepts now; `nil` if the peer is gone.
        static func send(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Int? {
            #if canImport(Glibc)
                let flags = Int32(MSG_NOSIGNAL)
            #else
                let flags: Int32 = 0  // SO_NOSIGPIPE is set on every socket instead
            #endif
            while true {
                let count = systemSend(fd, bytes.baseAddress, bytes.count, flags)
                if count >= 0 { return count }
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK { return 0 }
                return nil
            }
        }
    }

    // The C functions (Glibc's or Darwin's, whichever is imported), under names that the enum's own members above
    // do not shadow: at file scope, the plain names are the C functions.
    private func systemListen(_ fd: Int32, _ backlog: Int32) -> Int32 { listen(fd, backlog) }
    private func systemClose(_ fd: Int32) -> Int32 { close(fd) }
    private func systemWrite(_ fd: Int32, _ bytes: UnsafeRawPointer, _ count: Int) -> Int { write(fd, bytes, count) }
    private func systemSend(_ fd: Int32, _ bytes: UnsafeRawPointer?, _ count: Int, _ flags: Int32) -> Int {
        send(fd, bytes, count, flags)
    }
    private func systemAccept(
        _ fd: Int32, _ address: UnsafeMutablePointer<sockaddr>?, _ length: UnsafeMutablePointer<socklen_t>?
    ) -> Int32 {
        accept(fd, address, length)
    }
#else
    // Platforms without BSD sockets in Glibc or Darwin: the server cannot start.
    extension LoopbackSocket {
        private static func unsupported(_ operation: String) -> ScriptedHTTPServer.SocketError {
            ScriptedHTTPServer.SocketError(operation: operation + " (unsupported platform)", code: 0)
        }

        static func makeStreamSocket() throws -> Int32 { throw unsupported("socket") }
        static func bindLoopbackEphemeral(_ fd: Int32) throws -> Int { throw unsupported("bind") }
        static func listen(_ fd: Int32, backlog: Int32) throws { throw unsupported("listen") }
        static func accept(_ fd: Int32) -> AcceptResult { .failed }
        static func setNonBlocking(_ fd: Int32) {}
        static func setNoDelay(_ fd: Int32) {}
        static func setLingerZero(_ fd: Int32) {}
        static func shutdownWrite(_ fd: Int32) {}
        static func close(_ fd: Int32) {}
        static func retire(_ fd: Int32) {}
        static func makePipe() throws -> (read: Int32, write: Int32) { throw unsupported("pipe") }
        static func signal(_ writeEnd: Int32) {}
        static func wait(for fd: Int32, readable: Bool = true, stop: Int32, timeoutMilliseconds: Int32) -> Readiness {
            .stopped
        }
        static func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) -> ReadResult { .failed }
        static func send(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Int? { nil }
    }
#endif
