import DeltaStore
import HTTPTypes

extension StoredRules {
    /// Refuses to answer from these rules when the database holds another version (another
    /// instance started with another rules file): `503 rules-mismatch`, never two truths.
    func check(_ source: any RuleSource) throws {
        guard source.rulesVersion == version else {
            throw Problem(
                .serviceUnavailable, "rules-mismatch",
                "rules: this server holds version \(version) but the database holds version \(source.rulesVersion) (another instance started with another rules file); restart this one with the current file"
            )
        }
    }
}
