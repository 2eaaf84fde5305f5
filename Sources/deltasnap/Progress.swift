import Foundation

/// A one-line progress bar on stderr, shown only when stderr is a terminal.
final class Progress {
    private let label: String
    private let total: Int?
    private let enabled = isatty(STDERR_FILENO) != 0
    private var lastDraw = Date.distantPast

    init(label: String, total: Int?) {
        self.label = label
        self.total = total
    }

    /// Redraws at most ten times a second.
    func update(done: Int, records: Int) {
        guard enabled, Date().timeIntervalSince(lastDraw) > 0.1 else { return }
        lastDraw = Date()
        var line = "\r\(label): \(records) records"
        if let total, total > 0 {
            let fraction = min(1, Double(done) / Double(total))
            let filled = Int(fraction * 30)
            line += " [" + String(repeating: "#", count: filled) + String(repeating: ".", count: 30 - filled) + "] \(Int(fraction * 100))%"
        }
        FileHandle.standardError.write(Data(line.utf8))
    }

    /// Clears the line.
    func finish() {
        guard enabled else { return }
        FileHandle.standardError.write(Data("\r\u{1B}[K".utf8))
    }
}
