import DeltaCore
import DeltaTestSupport
import Testing

@Suite("Tokens and HTTP dates")
struct TokenTests {
    @Test("ETag form prints and parses as exact inverses")
    func entityTagRoundTrip() throws {
        let token = Token(database: 0x00ab_cdef_0123_4567, position: 42, commit: 0x0000_beef)
        #expect(token.entityTag == #"W/"1.00abcdef01234567.42.0000beef""#)
        #expect(try Token(entityTag: token.entityTag) == token)
        var generator = SeededGenerator(seed: 7)
        for _ in 0..<2_000 {
            let random = Token(
                database: generator.next(), position: generator.next() % Token.maximumPosition,
                commit: UInt32(truncatingIfNeeded: generator.next()))
            #expect(try Token(entityTag: random.entityTag) == random)
        }
    }

    @Test("Last-Modified is an IMF-fixdate whose seconds since 1970 are the position")
    func lastModifiedRoundTrip() throws {
        #expect(Token(database: 1, position: 0, commit: 0).lastModified == "Thu, 01 Jan 1970 00:00:00 GMT")
        #expect(Token(database: 1, position: 7, commit: 9).lastModified == "Thu, 01 Jan 1970 00:00:07 GMT")
        #expect(HTTPDate.format(784_111_777) == "Sun, 06 Nov 1994 08:49:37 GMT")  // RFC 9110's example
        #expect(HTTPDate.format(951_782_400) == "Tue, 29 Feb 2000 00:00:00 GMT")
        #expect(HTTPDate.format(HTTPDate.maximumSeconds) == "Fri, 31 Dec 9999 23:59:59 GMT")
        var generator = SeededGenerator(seed: 11)
        for _ in 0..<5_000 {
            let seconds = generator.next() % (HTTPDate.maximumSeconds + 1)
            let text = HTTPDate.format(seconds)
            #expect(HTTPDate.parse(text) == seconds, "\(text)")
            #expect(try Token.position(lastModified: text) == seconds)
        }
    }

    @Test(
        "Anything not printed exactly so is refused",
        arguments: [
            "", "W/\"1.00abcdef01234567.42.0000beef", "\"1.00abcdef01234567.42.0000beef\"",
            "W/\"2.00abcdef01234567.42.0000beef\"", "W/\"1.00ABCDEF01234567.42.0000beef\"",
            "W/\"1.abcdef01234567.42.0000beef\"", "W/\"1.00abcdef01234567.042.0000beef\"",
            "W/\"1.00abcdef01234567.-1.0000beef\"", "W/\"1.00abcdef01234567.+1.0000beef\"",
            "W/\"1.00abcdef01234567.42.beef\"", "W/\"1.00abcdef01234567.42.0000beef.0\"",
            "W/\"1.00abcdef01234567.99999999999999999999.0000beef\"", " W/\"1.00abcdef01234567.42.0000beef\"",
        ])
    func malformedEntityTags(text: String) {
        #expect(throws: WireError.self) { try Token(entityTag: text) }
    }

    @Test(
        "Dates that are not our exact IMF-fixdate are refused",
        arguments: [
            "Sun, 06 Nov 1994 08:49:37 GMT ", "Mon, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994", "Sun, 6 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sun, 06 Nov 1994 24:00:00 GMT", "Sun, 31 Nov 1994 08:49:37 GMT", "Wed, 31 Dec 1969 23:59:59 GMT",
            "Thu, 29 Feb 2001 00:00:00 GMT", "",
        ])
    func malformedDates(text: String) {
        #expect(HTTPDate.parse(text) == nil)
    }

    @Test("A selection's ETag carries its fingerprint, its cut and its state digest, and parses back exactly; the form without a digest is refused")
    func selectionEntityTag() throws {
        let digest = StateDigest(bodies: [Array(#"{"id":"a","n":1}"#.utf8), Array(#"{"id":"b","n":2}"#.utf8)])
        let token = Token(database: 0x00ab_cdef_0123_4567, position: 42, commit: 0x0000_beef)
            .marked(SelectionMark(fingerprint: "0123456789abcdef", boundary: "b", digest: digest))
        let expected = "W/\"1.00abcdef01234567.42.0000beef.0123456789abcdef.62.a20bda701ad7a361dbd8454d0c4d8585fca6d60aebf5493b69b4ca84435e66ff\""
        #expect(token.entityTag == expected)
        #expect(try Token(entityTag: token.entityTag) == token)
        let uncut = token.marked(SelectionMark(fingerprint: "0123456789abcdef", boundary: nil, digest: .empty))
        #expect(uncut.entityTag == "W/\"1.00abcdef01234567.42.0000beef.0123456789abcdef.." + String(repeating: "0", count: 64) + "\"")
        #expect(try Token(entityTag: uncut.entityTag) == uncut)
        let refused = ["W/\"1.00abcdef01234567.42.0000beef.0123456789abcdef.62\"", "W/\"1.00abcdef01234567.42.0000beef.0123456789abcdef.62.abcd\""]
        for bad in refused {
            #expect(throws: WireError.self, "\(bad)") { try Token(entityTag: bad) }
        }
    }

    @Test("Token errors say what, why and show the evidence")
    func errorMessages() {
        #expect(throws: WireError(.token, "not an entity tag this server issued", evidence: #""\"abc\"""#)) {
            try Token(entityTag: "\"abc\"")
        }
        let error = WireError(.token, "not an IMF-fixdate this server issued", evidence: #""yesterday""#)
        #expect(error.description == #"token: not an IMF-fixdate this server issued ("yesterday")"#)
        #expect(throws: error) { try Token.position(lastModified: "yesterday") }
    }
}
