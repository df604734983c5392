"""Who owns a registered agent: a typed name, so a subject and a client id never collide.

A token with a subject owns what it registers as `sub:<subject>`; a token without one owns as
`client:<client id>`. A token carrying only `client_id=alice` is not the user `sub=alice`.

Records written before owners were typed hold the bare subject-or-client-id and no `format`.
They are read as `sub:<value>`, because the old code stored the subject whenever the token had
one (the usual case). A legacy record that a subject-less client registered is then changed
only by the admin scope, or by a token whose subject is that client id; an admin can delete it
for the client to register again. The next write of any record stores its owner typed.
"""

from __future__ import annotations

from typing import Any

from gateway.model import Principal

RECORD_FORMAT = 2  # records from format 2 on hold typed owners


def owner_of(principal: Principal) -> str | None:
    """The owner name a caller registers under: its subject, else its client id; typed."""
    if principal.subject:
        return f"sub:{principal.subject}"
    if principal.client_id:
        return f"client:{principal.client_id}"
    return None


def record_owner(record: dict[str, Any]) -> str:
    """The typed owner of a stored record, reading a legacy untyped owner as a subject."""
    owner = str(record["owner"])
    if record.get("format", 1) >= RECORD_FORMAT:
        return owner
    return f"sub:{owner}"
