import Foundation

/// Inflates a gzip stream on a thread of its own, so that a reader checks one piece of content
/// while zlib produces the next: on two cores a snapshot verifies in about the time inflation alone takes.
///
/// The compressed source is read on the reader's thread (its closure never leaves that thread)
/// and handed over in pieces; the worker's `Inflater` lives and dies on the worker's thread.
/// Both queues are bounded, so memory stays at a few MiB whatever the size of the stream.
final class InflateWorker: @unchecked Sendable {
    /// What the worker hands back, in stream order.
    enum Output {
        /// The next decompressed bytes.
        case bytes([UInt8])
        /// The stream ended, its checksum verified, and nothing followed it.
        case end
        /// The stream is corrupt, truncated, or followed by more data.
        case failure(WireError)
    }

    private static let maximumInput = 2
    private static let maximumOutput = 4
    private static let blockSize = 1 << 18
    private let condition = NSCondition()
    private var input: [[UInt8]] = []
    private var inputEnded = false
    private var output: [Output] = []
    private var cancelled = false

    /// Starts the worker's thread.
    init() {
        let thread = Thread { [self] in run() }
        thread.name = "deltasnap inflate"
        thread.start()
    }

    /// Whether the worker has room for another compressed piece (false once the input has ended).
    var wantsInput: Bool {
        condition.lock()
        defer { condition.unlock() }
        return !inputEnded && input.count < Self.maximumInput
    }

    /// Hands over the next compressed piece.
    func push(_ chunk: [UInt8]) {
        condition.lock()
        input.append(chunk)
        condition.broadcast()
        condition.unlock()
    }

    /// Says that the compressed source has ended.
    func endInput() {
        condition.lock()
        inputEnded = true
        condition.broadcast()
        condition.unlock()
    }

    /// The next output if there is one; with `wait`, blocks until there is one or until the
    /// worker has room for more input (then nil).
    func take(wait: Bool) -> Output? {
        condition.lock()
        defer { condition.unlock() }
        while wait && output.isEmpty && (inputEnded || input.count >= Self.maximumInput) { condition.wait() }
        guard !output.isEmpty else { return nil }
        condition.broadcast()
        return output.removeFirst()
    }

    /// Stops the worker: the reader has gone.
    func cancel() {
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

    /// The next compressed piece, or nil once the input has ended or the worker was cancelled.
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

    private func run() {
        let block = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.blockSize, alignment: 16)
        defer { block.deallocate() }
        do {
            let inflater = try Inflater()
            while let chunk = nextInput() {
                var offset = 0
                var produced = 0
                repeat {
                    let step = try chunk.withUnsafeBytes { try inflater.decompress(UnsafeRawBufferPointer(rebasing: $0[offset...]), into: block) }
                    offset += step.consumed
                    produced = step.produced
                    if produced > 0, !deliver(.bytes(Array(UnsafeRawBufferPointer(rebasing: block[0..<produced])))) { return }
                    // zlib may hold output it had no room for even after taking all input.
                } while (offset < chunk.count || produced == block.count) && !inflater.isFinished
            }
            guard !isCancelled else { return }
            try inflater.requireFinished()
            _ = deliver(.end)
        } catch let error as WireError {
            _ = deliver(.failure(error))
        } catch {
            _ = deliver(.failure(WireError(.compression, "inflate failed", evidence: "\(error)")))
        }
    }
}
