import NIOCore

/// Runs a task's jobs on one SwiftNIO event loop: a task that prefers it (Swift's
/// `withTaskExecutorPreference`) resumes on that loop's thread after each `await`.
///
/// For work that never blocks its thread (`ChangeStore.runsOnEventLoops`): a request handled on
/// its connection's loop, awaiting PostgreSQL on a connection of the same loop, reads, asks and
/// answers without waking another thread. On the default executors each `await` on the
/// database crossed from the loop to the cooperative pool and back: 14 `futex` calls and 5
/// event-loop wake-ups per user delta, a fifth of its server CPU (docs/decisions/2026-11-27-postgres-requests-on-event-loops.md).
@available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *)
package final class EventLoopExecutor: TaskExecutor {
    /// The loop the jobs run on.
    package let loop: any EventLoop

    /// An executor for `loop`.
    package init(_ loop: any EventLoop) { self.loop = loop }

    /// Runs `job` on the loop (at once, in order, when called from the loop itself).
    package func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        loop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
