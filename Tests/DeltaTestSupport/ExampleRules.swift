/// The rules file docs/PROTOCOL.md documents ("Users and rules"): a public collection, users' own
/// notes with a stamp, documents shared through a list, memberships, and posts read through them.
public let exampleRules = #"""
    {"collections": {
      "airports": {"read": true},
      "notes":   {"read":  {"owner": {"eq": {"$claim": "sub"}}},
                  "write": {"owner": {"eq": {"$claim": "sub"}}},
                  "stamp": {"owner": {"$claim": "sub"}}},
      "docs":    {"read":  {"or": [{"owner": {"eq": {"$claim": "sub"}}}, {"editors": {"has": {"$claim": "sub"}}}]},
                  "write": {"or": [{"owner": {"eq": {"$claim": "sub"}}}, {"editors": {"has": {"$claim": "sub"}}}]}},
      "members": {"read":  {"user": {"eq": {"$claim": "sub"}}}},
      "posts":   {"read":  {"team": {"in": {"$rows": {"collection": "members", "where": {"user": {"eq": {"$claim": "sub"}}}, "member": "team"}}}},
                  "write": {"team": {"in": {"$rows": {"collection": "members", "where": {"user": {"eq": {"$claim": "sub"}}}, "member": "team"}}}}}
    }}
    """#
