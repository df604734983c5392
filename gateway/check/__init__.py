"""`aigw check URL`: a black-box conformance checker for any origin, aigw or not.

It finds what the origin serves from the well-known documents, validates them against the
spec schemas shipped in the package, exercises the behaviour a client can see, and reports
each rule (stable id, MUST or SHOULD, spec section) as pass, fail or skip. It is a client:
it imports nothing of the gateway's surfaces, and copies a spec's value where it needs one.
"""

# The specs in the order they are checked and reported; `--only` takes these names.
SPEC_KEYS = ("aiendpoint", "aidre", "aip", "pdpp", "aidip", "mcp", "a2a")
