import DeltaSQLite
import Testing

@testable import DeltaClient

@Suite("ReplicaError: SQLite's failures as the replica's kinds")
struct ReplicaErrorTests {
    @Test("SQLITE_FULL and shared memory that cannot be made are .diskFull (transient); other failures .store")
    func diskFullKinds() {
        let cases: [(Int32, ReplicaError.Kind)] = [(13, .diskFull), (4874, .diskFull), (778, .store), (11, .store), (5, .store)]
        for (code, kind) in cases {
            let error = ReplicaError("cannot write", storing: SQLiteError(code: code, message: "m"), path: "/p")
            #expect(error.kind == kind, "code \(code)")
            #expect(error.isTransient == (kind == .diskFull), "code \(code)")
        }
        #expect(
            ReplicaError("cannot write", storing: SQLiteError(code: 13, message: "database or disk is full"), path: "/p").description
                == "disk full: cannot write: the device is out of space (/p: SQLite: database or disk is full (code 13))")
    }
}
