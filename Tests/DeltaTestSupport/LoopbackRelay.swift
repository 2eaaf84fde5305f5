import DeltaSQLite
import Foundation

/// A blocking TCP connection to the loopback's `port`: its socket, for the caller to close.
public func connectLoopback(port: Int) throws -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw TestFailure("socket() failed") }
    var address = loopbackAddress(port: port)
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else {
        close(fd)
        throw TestFailure("connect() failed")
    }
    return fd
}

private func loopbackAddress(port: Int) -> sockaddr_in {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    return address
}

/// A TCP relay on the loopback that passes what its clients send on to `upstream`, and the
/// answers back, except that a connection passes no more than `holdingAfter` bytes: what it sends
/// after is read and dropped, so a larger request never ends. A test then cuts that transfer
/// when it likes, and the server has kept at most `holdingAfter` bytes: a cut halfway by
/// construction, not by winning a race against loopback's speed. After ``passWhole()``, new
/// connections pass everything.
///
/// Every connection's two directions are copied by threads of their own (blocking calls, off
/// Swift's executor); when either direction ends, both sockets close. ``close()`` ends them all.
public final class LoopbackRelay: @unchecked Sendable {
    /// The port it listens on, at 127.0.0.1.
    public let port: Int
    private let listener: Int32
    private let upstream: Int
    private let holdingAfter: Int
    private let lock = NSLock()
    private var open: Set<Int32> = []
    private var closed = false
    private var listenerClosed = false
    private var holding = true

    /// Listens on a free loopback port and relays to `upstream`.
    public init(upstream: Int, holdingAfter: Int) throws {
        self.upstream = upstream
        self.holdingAfter = holdingAfter
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard listener >= 0 else { throw TestFailure("LoopbackRelay: socket() failed") }
        var address = loopbackAddress(port: 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, length) == 0 && listen(listener, 64) == 0 && getsockname(listener, $0, &length) == 0
            }
        }
        guard bound else {
            Foundation.close(listener)
            throw TestFailure("LoopbackRelay: cannot listen on the loopback (errno \(errno))")
        }
        self.listener = listener
        port = Int(UInt16(bigEndian: address.sin_port))
        Self.start { [self] in acceptAll() }
    }

    /// Connections made from now on pass everything they send. One already open keeps its limit
    /// (a cut connection is closed, so a resumed transfer comes on a new one).
    public func passWhole() { lock.withLock { holding = false } }

    /// Stops listening and ends every relayed connection.
    ///
    /// The sockets are shut down under the lock that also guards their `close`: a descriptor
    /// closed elsewhere could already be another test's socket.
    public func close() {
        lock.withLock {
            if closed { return }
            closed = true
            if !listenerClosed { shutdown(listener, Int32(SHUT_RDWR)) }
            for fd in open { shutdown(fd, Int32(SHUT_RDWR)) }
        }
    }

    private static func start(_ body: @escaping @Sendable () -> Void) {
        let thread = Thread(block: body)
        thread.stackSize = 1 << 20
        thread.start()
    }

    private func acceptAll() {
        defer {
            lock.withLock {
                listenerClosed = true
                Foundation.close(listener)
            }
        }
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 && (errno == EINTR || errno == ECONNABORTED) { continue }
            guard client >= 0 else { return }
            guard let server = try? connectLoopback(port: upstream) else {
                Foundation.close(client)
                continue
            }
            let (kept, holds) = lock.withLock { () -> (Bool, Bool) in
                if closed { return (false, false) }
                open.formUnion([client, server])
                return (true, holding)
            }
            guard kept else {
                Foundation.close(client)
                Foundation.close(server)
                return
            }
            let ended = Locked(0)
            let finish: @Sendable () -> Void = { [self] in
                // Ends the other direction too. The second direction to end closes the sockets:
                // neither is in use any more.
                lock.withLock {
                    shutdown(client, Int32(SHUT_RDWR))
                    shutdown(server, Int32(SHUT_RDWR))
                }
                let count = ended.withLock { value -> Int in
                    value += 1
                    return value
                }
                guard count == 2 else { return }
                lock.withLock {
                    open.subtract([client, server])
                    Foundation.close(client)
                    Foundation.close(server)
                }
            }
            Self.start { [self] in
                copy(from: client, to: server, holding: holds)
                finish()
            }
            Self.start { [self] in
                copy(from: server, to: client, holding: false)
                finish()
            }
        }
    }

    private func copy(from source: Int32, to destination: Int32, holding: Bool) {
        var passed = 0
        var dropping = false
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let count = recv(source, &buffer, buffer.count, 0)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return }
            if dropping { continue }
            var end = count
            if holding && passed + count > holdingAfter {
                dropping = true
                end = holdingAfter - passed
            }
            var offset = 0
            while offset < end {
                let written = buffer[offset..<end].withUnsafeBytes { send(destination, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if written < 0 && errno == EINTR { continue }
                guard written > 0 else { return }
                offset += written
            }
            passed += end
        }
    }
}
