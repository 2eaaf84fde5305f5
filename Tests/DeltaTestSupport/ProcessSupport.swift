import Foundation
import NIOCore
import NIOPosix

/// A child process started for a test and always stopped at the end.
///
/// Started with `posix_spawn`, not Foundation's `Process`: on Linux, `Process.run()` sometimes
/// crashes while it lists `/proc/self/fd` (it copies 256 bytes of each `dirent`, past the end of
/// glibc's buffer: swift-corelibs-foundation PR 5472, merged after Swift 6.3.1). A whole test run
/// died of it once, in `WriteCommandTests`. Like `Process`, the child gets default signal
/// handling, an empty signal mask, no descriptors but its three, and stdin from /dev/null.
public final class ChildProcess: @unchecked Sendable {
    /// The child's process id.
    public let pid: pid_t
    /// Its standard output and error, together.
    public let output = Pipe()

    /// Starts `executable` with `arguments`, adding `environment` to the test's own.
    public init(_ executable: String, _ arguments: [String], environment: [String: String]? = nil) throws {
        let variables = ProcessInfo.processInfo.environment.merging(environment ?? [:]) { $1 }
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = variables.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        let writer = output.fileHandleForWriting.fileDescriptor
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, writer, 1)
        posix_spawn_file_actions_adddup2(&actions, writer, 2)
        guard try Self.closeFrom(&actions, 3) == 0 else { throw TestFailure("posix_spawn_file_actions_addclosefrom_np failed") }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var all = sigset_t()
        var none = sigset_t()
        sigfillset(&all)
        sigemptyset(&none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))
        var child: pid_t = 0
        let status = posix_spawn(&child, executable, &actions, &attributes, argv, envp)
        // The parent keeps only the reading end: the output ends when the child does.
        try? output.fileHandleForWriting.close()
        guard status == 0 else { throw TestFailure("cannot start \(executable): \(String(cString: strerror(status)))") }
        pid = child
    }

    /// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34 and later), which Swift's Glibc
    /// module does not declare.
    private typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    private static let closeFromSymbol: CloseFrom? = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np")
        .map { unsafeBitCast($0, to: CloseFrom.self) }

    private static func closeFrom(_ actions: UnsafeMutablePointer<posix_spawn_file_actions_t>, _ first: Int32) throws -> Int32 {
        guard let function = Self.closeFromSymbol else {
            throw TestFailure("this glibc has no posix_spawn_file_actions_addclosefrom_np (2.34 or later needed)")
        }
        return function(actions, first)
    }

    private var exitStatus: Int32?

    /// The exit code once the process has ended, 128 + N when signal N ended it.
    /// Reaped here, once.
    public func exited() -> Int32? {
        if let exitStatus { return exitStatus }
        var status: Int32 = 0
        let result = waitpid(pid, &status, WNOHANG)
        if result == pid {
            exitStatus = status & 0x7F == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
        } else if result == -1 && errno == ECHILD {
            // Reaped by someone else: ended, with its status lost (a test that checks it fails).
            exitStatus = 255
        }
        return exitStatus
    }

    /// Sends `signal` (0 sends none) and waits for the process to end; returns its exit code.
    @discardableResult
    public func stop(_ signal: Int32 = SIGTERM, timeout: Duration = .seconds(20)) async -> Int32 {
        if exited() == nil && signal != 0 { kill(pid, signal) }
        let deadline = ContinuousClock.now + timeout
        // The output is read meanwhile: a child that prints more than a pipe holds (64 KiB) would
        // otherwise block on its next write and never end.
        while exited() == nil && ContinuousClock.now < deadline {
            drain()
            try? await Task.sleep(for: .milliseconds(10))
        }
        if exited() == nil {
            kill(pid, SIGKILL)
            while exited() == nil { try? await Task.sleep(for: .milliseconds(10)) }
        }
        return exited() ?? 0
    }

    /// What `announcedPort` read before the process ended.
    private var announced = Data()

    /// What `announcedPort` read, without waiting for more (`printed` waits for the process to end).
    public var announcement: String { String(decoding: announced, as: UTF8.self) }

    /// Everything the process printed so far (only once it has ended): all of it, read until the
    /// pipe ends or stays silent for five seconds (a grandchild may hold it open).
    public var printed: String {
        drain(until: ContinuousClock.now + .seconds(5))
        return String(decoding: announced, as: UTF8.self)
    }

    /// Reads what the pipe holds now into `announced`; with a deadline, goes on until the pipe
    /// ends or the deadline passes with nothing more to read.
    private func drain(until deadline: ContinuousClock.Instant? = nil) {
        let handle = output.fileHandleForReading
        var pending = pollfd(fd: handle.fileDescriptor, events: Int16(POLLIN), revents: 0)
        while poll(&pending, 1, deadline == nil ? 0 : 100) > 0 || (deadline.map { ContinuousClock.now < $0 } ?? false) {
            guard pending.revents != 0 else { continue }
            var buffer = [UInt8](repeating: 0, count: 65_536)
            let count = read(handle.fileDescriptor, &buffer, buffer.count)
            if count <= 0 { return }  // the pipe ended
            announced.append(contentsOf: buffer[0..<count])
        }
    }

    /// The port a `deltasnap serve --port 0` chose, from the line it prints once it listens
    /// ("deltasnap: serving … on http://HOST:PORT (…)"). A port picked free beforehand could be
    /// taken by another test's server before this one binds it; port 0 cannot.
    public func announcedPort(timeout: Duration = .seconds(30)) async throws -> Int {
        let handle = output.fileHandleForReading
        let deadline = ContinuousClock.now + timeout
        return try await offThePool { [self] in
            var pending = pollfd(fd: handle.fileDescriptor, events: Int16(POLLIN), revents: 0)
            while ContinuousClock.now < deadline {
                guard poll(&pending, 1, 100) > 0 else { continue }
                let chunk = handle.availableData
                if chunk.isEmpty { break }  // the process ended
                announced.append(chunk)
                let text = String(decoding: announced, as: UTF8.self)
                if let line = text.split(separator: "\n").first(where: { $0.hasPrefix("deltasnap: serving ") }),
                    let address = line.split(separator: " ").first(where: { $0.hasPrefix("http://") }),
                    let port = address.split(separator: ":").last.flatMap({ Int($0) })
                {
                    return port
                }
            }
            throw TestFailure("deltasnap serve did not announce its port: \(String(decoding: announced, as: UTF8.self))")
        }
    }

    deinit {
        if exited() == nil {
            kill(pid, SIGKILL)
            waitpid(pid, nil, 0)
        }
    }
}

/// Runs a program to its end (at most a minute): its exit code and what it printed (keep that
/// under a pipe's 64 KiB: nothing reads it before the end).
public func runProgram(_ path: String, _ arguments: [String]) async throws -> (status: Int32, printed: String) {
    let child = try ChildProcess(path, arguments)
    let status = await child.stop(0, timeout: .seconds(60))
    return (status, child.printed)
}

/// A TCP port that was free a moment ago on 127.0.0.1.
public func freePort() throws -> Int {
    let channel = try ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.1", port: 0).wait()
    let port = channel.localAddress!.port!
    try channel.close().wait()
    return port
}

/// Waits until something accepts connections on `port`.
public func waitForPort(_ port: Int, timeout: Duration = .seconds(20)) async throws {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if let channel = try? await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton).connect(host: "127.0.0.1", port: port).get() {
            try? await channel.close()
            return
        }
        try await Task.sleep(for: .milliseconds(50))
    }
    throw TestFailure("nothing listens on 127.0.0.1:\(port) after \(timeout)")
}

/// Where program `name` is: the first executable of that name on `PATH`, then in the system's
/// `sbin` directories (where Debian puts nginx and varnishd, outside a user's `PATH`); a path is
/// taken as it is. Nil when there is none.
public func findProgram(_ name: String) -> String? {
    if name.contains("/") { return FileManager.default.isExecutableFile(atPath: name) ? name : nil }
    let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
    let directories = path.split(separator: ":").map(String.init) + ["/usr/local/sbin", "/usr/sbin", "/sbin"]
    return directories.lazy.map { "\($0)/\(name)" }.first { FileManager.default.isExecutableFile(atPath: $0) }
}

/// Where program `name` is (`findProgram`), or a failure that says which Debian package installs it.
public func requireProgram(_ name: String, package: String) throws -> String {
    guard let found = findProgram(name) else {
        throw TestFailure("\(name) is missing: run Scripts/test.sh, which installs \(package), or apt-get install \(package)")
    }
    return found
}

/// A new, empty directory under the system's temporary directory.
public func makeTemporaryDirectory(_ prefix: String) throws -> String {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

/// A test's failure with a message that says what was expected.
public struct TestFailure: Error, CustomStringConvertible {
    /// What went wrong.
    public let description: String
    /// Creates a failure.
    public init(_ description: String) { self.description = description }
}

/// The built `deltasnap` executable, next to the test bundle.
public func deltasnapExecutable() throws -> String {
    let directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    for candidate in [directory, directory.deletingLastPathComponent()] {
        let path = candidate.appendingPathComponent("deltasnap").path
        if FileManager.default.isExecutableFile(atPath: path) { return path }
    }
    throw TestFailure("deltasnap is not built next to the tests (\(directory.path)): run swift build --build-tests first")
}

/// Starts `deltasnap serve` on a port it picks itself and returns once it listens.
public func startServer(db: String, environment: [String: String]) async throws -> (ChildProcess, Int) {
    let server = try ChildProcess(try deltasnapExecutable(), ["serve", "--db", db, "--port", "0"], environment: environment)
    return (server, try await server.announcedPort())
}

/// The `?wait=` the live tests ask for, in seconds: the server's default maximum. A missed
/// wake-up shows as an answer this long after the commit.
public let liveWait = 30

/// How soon after a commit a live request must answer: `DELTASNAP_WAKE_BOUND_MS`, default 20,000
/// (the whole suite shares two cores, and a loaded run has stalled a live answer for 10.9 s;
/// `Scripts/reliability.sh` runs those tests alone with 1,000, the bound). Either way
/// below `liveWait`, which a missed wake-up would take.
public let wakeBound = Duration.milliseconds(Int(ProcessInfo.processInfo.environment["DELTASNAP_WAKE_BOUND_MS"] ?? "") ?? 20_000)

/// The nginx configuration every test's nginx starts from: one process in the foreground, its
/// files under `directory`, no access log; `http` holds the caller's directives inside `http { }`.
public func nginxConfiguration(directory: String, connections: Int, http: String) -> String {
    """
    daemon off;
    master_process off;
    worker_processes 1;
    pid \(directory)/nginx.pid;
    error_log \(directory)/error.log warn;
    events { worker_connections \(connections); }
    http {
        access_log off;
        keepalive_timeout 600s;
        client_body_temp_path \(directory)/body;
        proxy_temp_path \(directory)/proxy;
        fastcgi_temp_path \(directory)/fastcgi;
        uwsgi_temp_path \(directory)/uwsgi;
        scgi_temp_path \(directory)/scgi;
    \(http)
    }
    """
}

/// Whether the large-blob memory suites run: only when `DELTASNAP_BLOB_TEST_MIB` names their
/// size, as `Scripts/reliability.sh` does (1 GiB, on their own). Beside the whole suite, even
/// 128 MiB written up and down by three processes saturated the disk for tens of seconds, and
/// other tests' SQLite commits waited behind it until their requests timed out (CI at `664995f`).
public let largeBlobRun = ProcessInfo.processInfo.environment["DELTASNAP_BLOB_TEST_MIB"] != nil
