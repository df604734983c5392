"""Personal data in logs: how a caller's subject appears in every log the gateway writes.

One rule (`logging.subjects`) and one hash for the access log and the decision log alike, so
a subject hashed in one is the same string in the other and `aigw policy log --caller` finds
it in both.
"""

from __future__ import annotations

import functools
import hashlib
from typing import Literal

SubjectRule = Literal["hash", "clear", "omit"]


@functools.lru_cache(maxsize=4096)
def hashed_subject(subject: str) -> str:
    """A subject as logs show it by default (`subjects: hash`): `sha256:` + 32 hex digits."""
    return "sha256:" + hashlib.sha256(subject.encode()).hexdigest()[:32]


def logged_subject(subject: str | None, rule: SubjectRule) -> str | None:
    """The subject as a log line may show it; None when it is to be left out."""
    if subject is None or rule == "omit":
        return None
    return subject if rule == "clear" else hashed_subject(subject)
