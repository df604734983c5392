"""The one normal form of the names a platform declares (platform id, placement, uses) and the
rules name, so `Scraper-Bot`, ` scraper-bot ` and a full-width `Scraper-Bot` are all
`scraper-bot`.

NFKC folds compatibility forms (full-width letters, ligatures), casefold is Unicode's
case-insensitive form (`ß` -> `ss`), and NFKC again re-composes what casefolding split; runs of
Unicode whitespace become one space and the ends are stripped.
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Iterable


@functools.lru_cache(maxsize=1024)  # a busy platform sends the same names on every request
def normal_name(value: str) -> str:
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", value).casefold())
    return " ".join(folded.split())


def normal_names(values: Iterable[str] | None) -> list[str] | None:
    return None if values is None else [normal_name(value) for value in values]
