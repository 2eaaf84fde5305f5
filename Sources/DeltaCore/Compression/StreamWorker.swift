import Foundation

/// A zlib transform that a `StreamWorker` runs on its own thread.
package protocol StreamTransform {
    /// Transforms one input piece, handing output to `deliver`.
    mutating func process(_ input: [UInt8], deliver: ([UInt8]) -> Void) throws
    /// Ends the stream after the last input, handing the last output to `deliver`.
    mutating func finish(deliver: ([UInt8]) -> Void) throws
}

/// Runs a zlib transform (inflate or deflate) on a thread of its own, so that the caller's
/// thread checks, hashes or produces one piece while zlib works on the next: on two cores a
/// snapshot is written or verified in about the time zlib alone takes.
///
/// All I/O stays on the caller's thread (the source and sink closures never leave it): the
/// caller hands over input pieces and takes output pieces. The transform is made, used and
/// released on the worker's thread. Both queues are bounded, so memory stays at a few MiB
/// whatever the size of the stream.
package final class StreamWorker: @unchecked Sendable {
    /// What the worker hands back, in stream order.
    package enum Output {
        /// The next output bytes.
        case bytes([UInt8])
        /// The stream ended and was checked (for inflate: checksum verified, nothing after it).
        case end
        /// The transform failed: corrupt, truncated, or followed by more data.
        case failure(WireError)
    }

    private static let maximumInput = 2
    private static let maximumOutput = 4
    private let condition = NSCondition()
    private var input: [[UInt8]] = []
    private var inputEnded = false
    private var output: [Output] = []
    private var cancelled = false

    /// Starts the worker's thread, which makes its transform with `make`.
    package init(_ name: String, make: @escaping @Sendable () throws -> any StreamTransform) {
        let thread = Thread { [self] in run(make) }
        thread.name = name
        thread.start()
    }

    /// Whether the worker has room for another input piece (false once the input has ended).
    package var wantsInput: Bool {
        condition.lock()
        defer { condition.unlock() }
        return !inputEnded && input.count < Self.maximumInput
    }

    /// Hands over the next input piece.
    package func push(_ chunk: [UInt8]) {
        condition.lock()
        input.append(chunk)
        condition.broadcast()
        condition.unlock()
    }

    /// Says that the input has ended.
    package func endInput() {
        condition.lock()
        inputEnded = true
        condition.broadcast()
        condition.unlock()
    }

    /// The next output if there is one; with `wait`, blocks until there is one or until the
    /// worker has room for more input (then nil).
    package func take(wait: Bool) -> Output? {
        condition.lock()
        defer { condition.unlock() }
        while wait && output.isEmpty && (inputEnded || input.count >= Self.maximumInput) { condition.wait() }
        guard !output.isEmpty else { return nil }
        condition.broadcast()
        return output.removeFirst()
    }

    /// Stops the worker: its caller has gone.
    package func cancel() {
        condition.lock()
        cancelled = true
        condition.broadcast()
        condition.unlock()
    }

    /// Waits for output room, then queues `item`; false once cancelled.
    private func deliver(_ item: Output) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while output.count >= Self.maximumOutput && !cancelled { condition.wait() }
        guard !cancelled else { return false }
        output.append(item)
        condition.broadcast()
        return true
    }

    /// The next input piece, or nil once the input has ended or the worker was cancelled.
    private func nextInput() -> [UInt8]? {
        condition.lock()
        defer { condition.unlock() }
        while input.isEmpty && !inputEnded && !cancelled { condition.wait() }
        guard !cancelled, !input.isEmpty else { return nil }
        condition.broadcast()
        return input.removeFirst()
    }

    private var isCancelled: Bool {
        condition.lock()
        defer { condition.unlock() }
        return cancelled
    }

    private func run(_ make: () throws -> any StreamTransform) {
        do {
            var transform = try make()
            while let piece = nextInput() {
                try transform.process(piece) { _ = deliver(.bytes($0)) }
                guard !isCancelled else { return }
            }
            guard !isCancelled else { return }
            try transform.finish { _ = deliver(.bytes($0)) }
            _ = deliver(.end)
        } catch let error as WireError {
            _ = deliver(.failure(error))
        } catch {
            _ = deliver(.failure(WireError(.compression, "zlib failed", evidence: "\(error)")))
        }
    }
}

/// Inflating: the output comes in pieces of at most 256 KiB.
final class InflateTransform: StreamTransform {
    private let inflater: Inflater

    init() throws { inflater = try Inflater(pieceSize: 1 << 18) }

    func process(_ input: [UInt8], deliver: ([UInt8]) -> Void) throws {
        try inflater.decompress(input, deliver)
    }

    func finish(deliver: ([UInt8]) -> Void) throws { try inflater.requireFinished() }
}
