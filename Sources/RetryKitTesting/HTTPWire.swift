import Foundation

/// One connection's byte stream: buffered non-blocking reads and complete writes, each wait interruptible by the
/// server's stop pipe.
struct ConnectionStream {
    let fd: Int32
    let stop: Int32
    private var buffer: [UInt8] = []
    private var scratch = [UInt8](repeating: 0, count: 16 * 1024)

    init(fd: Int32, stop: Int32) {
        self.fd = fd
        self.stop = stop
    }

    /// Reads whatever arrives next into the buffer. `false` on end of stream, error or stop.
    private mutating func fill() -> Bool {
        while true {
            switch LoopbackSocket.wait(for: fd, stop: stop, timeoutMilliseconds: -1) {
            case .stopped: return false
            case .timedOut: continue
            case .ready: break
            }
            let result = scratch.withUnsafeMutableBytes { LoopbackSocket.read(fd, into: $0) }
            switch result {
            case .bytes(let count):
                buffer.append(contentsOf: scratch[0..<count])
                return true
            case .wouldBlock: continue
            case .endOfStream, .failed: return false
            }
        }
    }

    /// The bytes up to and including the first `\r\n\r\n`, or `nil` if the stream ends first or the head grows beyond
    /// `limit` bytes (`tooLarge` is then set).
    mutating func readHead(limit: Int, tooLarge: inout Bool) -> [UInt8]? {
        var searchFrom = 0
        while true {
            if let end = Self.find([13, 10, 13, 10], in: buffer, from: searchFrom) {
                let head = Array(buffer[0..<end + 4])
                buffer.removeFirst(end + 4)
                return head
            }
            if buffer.count > limit {
                tooLarge = true
                return nil
            }
            searchFrom = Swift.max(0, buffer.count - 3)
            guard fill() else { return nil }
        }
    }

    /// Exactly `count` bytes, or `nil` if the stream ends first.
    mutating func read(count: Int) -> [UInt8]? {
        while buffer.count < count {
            guard fill() else { return nil }
        }
        let bytes = Array(buffer[0..<count])
        buffer.removeFirst(count)
        return bytes
    }

    /// One line without its line ending (`\r\n` or a bare `\n`), or `nil` if the stream ends first or the line grows
    /// beyond `limit` bytes.
    mutating func readLine(limit: Int) -> String? {
        while true {
            if let newline = buffer.firstIndex(of: 10) {
                var line = buffer[0..<newline]
                if line.last == 13 { line = line.dropLast() }
                let text = String(decoding: line, as: UTF8.self)
                buffer.removeFirst(newline + 1)
                return text
            }
            if buffer.count > limit { return nil }
            guard fill() else { return nil }
        }
    }

    /// Writes all of `bytes`; `false` if the peer went away or the server stopped first.
    func write(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes.withUnsafeBytes { all in
                LoopbackSocket.send(fd, UnsafeRawBufferPointer(rebasing: all[offset...]))
            }
            guard let sent else { return false }
            offset += sent
            if sent == 0 {
                guard case .ready = LoopbackSocket.wait(for: fd, readable: false, stop: stop, timeoutMilliseconds: -1)
                else { return false }
            }
        }
        return true
    }

    /// Reads and discards input until the peer closes, the server stops, or `timeoutMilliseconds` passes without
    /// input. Used after a response so that closing never turns unread input into a reset, and by `neverAnswer`.
    mutating func drain(timeoutMilliseconds: Int32) {
        while true {
            guard case .ready = LoopbackSocket.wait(for: fd, stop: stop, timeoutMilliseconds: timeoutMilliseconds)
            else { return }
            let result = scratch.withUnsafeMutableBytes { LoopbackSocket.read(fd, into: $0) }
            switch result {
            case .bytes, .wouldBlock: continue
            case .endOfStream, .failed: return
            }
        }
    }

    private static func find(_ pattern: [UInt8], in bytes: [UInt8], from start: Int) -> Int? {
        guard bytes.count >= pattern.count, start <= bytes.count - pattern.count else { return nil }
        var index = start
        while index <= bytes.count - pattern.count {
            if bytes[index] == pattern[0] && Array(bytes[index..<index + pattern.count]) == pattern { return index }
            index += 1
        }
        return nil
    }
}

/// The parsed request line and header fields of one HTTP/1.1 request.
struct RequestHead {
    var method: String
    var target: String
    var headers: [(name: String, value: String)]

    /// Parses a request head (request line and header fields, ending with an empty line). `nil` if malformed.
    init?(_ bytes: [UInt8]) {
        // Split on LF bytes (a `String` would treat CR LF as one character); drop the CR before each LF.
        var lines = bytes.split(separator: 10, omittingEmptySubsequences: false).map { line in
            String(decoding: line.last == 13 ? line.dropLast() : line, as: UTF8.self)
        }
        while let last = lines.last, last.isEmpty { lines.removeLast() }
        guard let requestLine = lines.first else { return nil }
        let parts = requestLine.split(separator: " ", omittingEmptySubsequences: true)
        guard parts.count == 3, parts[2].hasPrefix("HTTP/1.") else { return nil }
        method = String(parts[0])
        target = String(parts[1])
        headers = []
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { return nil }
            let name = String(line[..<colon])
            guard !name.isEmpty, !name.contains(" "), !name.contains("\t") else { return nil }
            let value = line[line.index(after: colon)...].trimmingCharacters(in: CharacterSet(charactersIn: " \t"))
            headers.append((name, value))
        }
    }

    /// The value of the first header field named `name` (case-insensitive).
    func value(_ name: String) -> String? {
        headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
    }

    /// The path part of the target, without the query or fragment.
    var path: String {
        let end = target.firstIndex { $0 == "?" || $0 == "#" } ?? target.endIndex
        return String(target[..<end])
    }
}

/// Serializes responses.
enum ResponseWriter {
    /// The bytes of a complete `HTTP/1.1` response that asks the client to close the connection.
    ///
    /// A `Content-Length` and `Connection: close` are added unless the caller set them; a response to `HEAD` and a
    /// 1xx, 204 or 304 response carry no body. Header names and values go through ``sanitize(_:)``, so that a script
    /// can never split the response or add a header line of its own.
    static func bytes(status: Int, headers: [String: String], body: Data, forHEAD: Bool) -> [UInt8] {
        let bodyless = forHEAD || (100..<200).contains(status) || status == 204 || status == 304
        var head = "HTTP/1.1 \(status) \(reasonPhrase(status))\r\n"
        var hasLength = false
        var hasConnection = false
        for (name, value) in headers.sorted(by: { $0.key < $1.key }) {
            let cleanName = sanitize(name)
            if cleanName.caseInsensitiveCompare("Content-Length") == .orderedSame { hasLength = true }
            if cleanName.caseInsensitiveCompare("Transfer-Encoding") == .orderedSame { hasLength = true }
            if cleanName.caseInsensitiveCompare("Connection") == .orderedSame { hasConnection = true }
            head += "\(cleanName): \(sanitize(value))\r\n"
        }
        let noLengthAllowed = (100..<200).contains(status) || status == 204
        if !hasLength && !noLengthAllowed { head += "Content-Length: \(body.count)\r\n" }
        if !hasConnection { head += "Connection: close\r\n" }
        head += "\r\n"
        var bytes = Array(head.utf8)
        if !bodyless { bytes.append(contentsOf: body) }
        return bytes
    }

    /// `text` with every carriage return, line feed and NUL replaced by a space.
    ///
    /// Works on Unicode scalars: as `Character`s, a CR LF pair is one grapheme that equals neither `"\r"` nor `"\n"`
    /// and would slip through.
    static func sanitize(_ text: String) -> String {
        var scalars = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\r", "\n", "\0": scalars.append(" ")
            default: scalars.append(scalar)
            }
        }
        return String(scalars)
    }

    static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 100: "Continue"
        case 200: "OK"
        case 201: "Created"
        case 202: "Accepted"
        case 204: "No Content"
        case 301: "Moved Permanently"
        case 302: "Found"
        case 304: "Not Modified"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 409: "Conflict"
        case 413: "Content Too Large"
        case 425: "Too Early"
        case 429: "Too Many Requests"
        case 431: "Request Header Fields Too Large"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        default: "Status \(status)"
        }
    }
}
