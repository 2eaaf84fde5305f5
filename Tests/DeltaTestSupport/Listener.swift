import Foundation

/// Starts a program that listens on a port it is told (nginx, Varnish), and returns once that
/// program itself listens there.
///
/// A port `freePort()` found free can be taken by another test's server before the program binds
/// it. Then the program cannot bind (nginx retries for a few seconds before it gives up), while
/// `waitForPort` would already see the other server and the test would talk to it: a UserCacheTests
/// run once got another test's `401 token-issuer` that way. So this waits until the port's listening
/// socket is one of the child's own descriptors (Linux's /proc), and tries another port if the
/// child ends first or another process holds the port. `ports` picks each try's port.
public func startListening(
    attempts: Int = 5, timeout: Duration = .seconds(20), ports: () throws -> Int = freePort,
    _ start: (Int) throws -> ChildProcess
) async throws -> (ChildProcess, Int) {
    var refused: [String] = []
    for _ in 0..<attempts {
        let port = try ports()
        let child = try start(port)
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline && child.exited() == nil {
            let sockets = listeningSockets(port: port)
            if !sockets.isEmpty {
                if !sockets.isDisjoint(with: socketInodes(of: child.pid)) { return (child, port) }
                break  // another process holds the port: try the next one
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        await child.stop(SIGKILL)
        refused.append("\(port): \(child.printed.suffix(300))")
    }
    throw TestFailure("the program never listened on a port of its own after \(attempts) tries: \(refused.joined(separator: "; "))")
}

/// The inodes of the IPv4 sockets listening on 127.0.0.1 or any address at `port`.
func listeningSockets(port: Int) -> Set<String> {
    // Read to the end: `String(contentsOfFile:)` stops after the first page of a /proc file (27
    // lines), so on a machine with many sockets (a loaded CI run) the listener was never found.
    guard let handle = FileHandle(forReadingAtPath: "/proc/net/tcp") else { return [] }
    defer { try? handle.close() }
    guard let bytes = try? handle.readToEnd() else { return [] }
    let table = String(decoding: bytes, as: UTF8.self)
    let suffix = ":" + String(format: "%04X", port)
    var inodes = Set<String>()
    for line in table.split(separator: "\n").dropFirst() {
        let fields = line.split(separator: " ")
        // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
        guard fields.count > 9, fields[1].hasSuffix(suffix), fields[3] == "0A" else { continue }
        inodes.insert(String(fields[9]))
    }
    return inodes
}

/// The inodes of the sockets process `pid` holds open.
func socketInodes(of pid: pid_t) -> Set<String> {
    let directory = "/proc/\(pid)/fd"
    guard let entries = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return [] }
    var inodes = Set<String>()
    for entry in entries {
        guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "\(directory)/\(entry)"),
            target.hasPrefix("socket:[")
        else { continue }
        inodes.insert(String(target.dropFirst("socket:[".count).dropLast()))
    }
    return inodes
}
