"""Write a json-server database of real text read from this machine's Debian package records.

    python examples/json-server/dataset.py db.json

Four collections, each a list of objects with an `id`:

- `packages`: every installed package (/var/lib/dpkg/status), its id the package name
  (`g++`, `libstdc++6`, `gir1.2-glib-2.0`), its description as text; `description`,
  `homepage`, `section` and `updated_at` are null where the package has none. A few synthetic
  records (`"synthetic": true`, summary "Synthetic record: ...") have ids with `/`, `%`,
  spaces, `?#` and non-ASCII letters, which no package name has.
- `maintainers`: who maintains them, by e-mail address (`team+boost@tracker.debian.org`), with
  the names as written (ChangZhuo Chen (陳昌倬)).
- `changes`: the newest entries of each package's Debian changelog, their id
  `<source>/<version>` (`gcc-12/12.2.0-14+deb12u1`), with a `date`.
- `notes`: empty; json-server stores what is POSTed there (the example's AIDIP agent does).

Nothing is fetched and nothing is random: the same files give the same bytes.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

DPKG_STATUS = Path("/var/lib/dpkg/status")
DOC_DIR = Path("/usr/share/doc")
CHANGES_PER_SOURCE = 8
_MAINTAINER = re.compile(r"^(?P<name>.*?)\s*<(?P<email>[^>]+)>\s*$")
_CHANGELOG_HEAD = re.compile(
    r"^(?P<source>[a-z0-9][a-z0-9+.-]*) \((?P<version>[^)]+)\) (?P<distribution>[^;]+);"
    r".*?urgency=(?P<urgency>\w+)", re.IGNORECASE)
_CHANGELOG_TRAILER = re.compile(r"^ -- (?P<author>.*?)\s*<(?P<email>[^>]*)>\s+(?P<date>.+)$")

SYNTHETIC_IDS = {
    "synthetic/with-slash": "an id with a slash, as path-like keys have",
    "synthetic-100%-percent": "an id with a literal percent sign",
    "synthetic with spaces": "an id with spaces",
    "synthétique-ünïcode-包": "an id with non-ASCII letters",
    "synthetic?query#fragment": "an id with the URL delimiters ? and #",
}


def stanzas(text: str) -> Iterator[dict[str, str]]:
    """The paragraphs of a deb822 file as {field: value}, continuation lines kept."""
    for block in text.split("\n\n"):
        fields: dict[str, str] = {}
        name = ""
        for line in block.splitlines():
            if line[:1] in (" ", "\t") and name:
                fields[name] += "\n" + line
            elif ":" in line:
                name, _, value = line.partition(":")
                fields[name] = value.strip()
        if fields:
            yield fields


def description(value: str) -> tuple[str, str]:
    """A deb822 Description as (summary, long text): ` .` lines are paragraph breaks."""
    summary, _, rest = value.partition("\n")
    paragraphs: list[list[str]] = [[]]
    for line in rest.splitlines():
        line = line[1:] if line.startswith(" ") else line
        if line.strip() == ".":
            paragraphs.append([])
        else:
            paragraphs[-1].append(line.strip())
    long_text = "\n\n".join(" ".join(p) for p in paragraphs if p)
    return summary.strip(), long_text


def maintainer(value: str) -> tuple[str, str]:
    match = _MAINTAINER.match(value)
    return (match["name"], match["email"]) if match else (value, value)


@dataclass(frozen=True)
class Change:
    source: str
    version: str
    distribution: str
    urgency: str
    author: str
    author_email: str
    date: str
    text: str

    def record(self) -> dict[str, Any]:
        return {"id": f"{self.source}/{self.version}", "source": self.source,
                "version": self.version, "distribution": self.distribution,
                "urgency": self.urgency, "author": self.author,
                "author_email": self.author_email, "date": self.date, "text": self.text}


def changelog(path: Path, limit: int) -> list[Change]:
    """The newest `limit` entries of a Debian changelog; entries that do not parse are skipped."""
    try:
        lines = gzip.decompress(path.read_bytes()).decode("utf-8", "replace").splitlines()
    except (OSError, EOFError):
        return []
    changes: list[Change] = []
    head: re.Match[str] | None = None
    body: list[str] = []
    for line in lines:
        if len(changes) >= limit:
            break
        if (start := _CHANGELOG_HEAD.match(line)) is not None:
            head, body = start, []
        elif head is not None and (end := _CHANGELOG_TRAILER.match(line)) is not None:
            if (when := iso_date(end["date"])) is not None:
                changes.append(Change(head["source"], head["version"], head["distribution"],
                                      head["urgency"].lower(), end["author"], end["email"],
                                      when, "\n".join(body).strip("\n")))
            head = None
        elif head is not None:
            body.append(line[2:] if line.startswith("  ") else line)
    return changes


def iso_date(value: str) -> str | None:
    """An RFC 2822 changelog date as RFC 3339 in UTC, or None when it does not parse."""
    try:
        moment = parsedate_to_datetime(value.strip())
    except (TypeError, ValueError):
        return None
    if moment.tzinfo is None:
        return None
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def source_changes(names: list[str], doc_dir: Path, limit: int) -> dict[str, list[Change]]:
    """Each package's changelog entries, by package name; a changelog shared by several
    packages (a doc directory symlinked to another) is read once."""
    by_file: dict[Path, list[Change]] = {}
    found: dict[str, list[Change]] = {}
    for name in names:
        # A native package (Debian's own software) has only changelog.gz, in the same format.
        paths = [doc_dir / name / f for f in ("changelog.Debian.gz", "changelog.gz")]
        path = next((p for p in paths if p.is_file()), None)
        if path is None:
            continue
        real = path.resolve()
        if real not in by_file:
            by_file[real] = changelog(real, limit)
        found[name] = by_file[real]
    return found


def package_record(fields: dict[str, str], changes: list[Change]) -> dict[str, Any]:
    name = fields["Package"]
    summary, long_text = description(fields.get("Description", ""))
    depends = [d.split()[0].split(":")[0] for d in re.split(r"[,|]", fields.get("Depends", ""))
               if d.strip()]
    size = fields.get("Installed-Size")
    return {
        "id": name, "name": name, "version": fields.get("Version"),
        "architecture": fields.get("Architecture"), "section": fields.get("Section"),
        "priority": fields.get("Priority"),
        "source": fields.get("Source", name).split()[0],
        "maintainer_id": maintainer(fields.get("Maintainer", ""))[1],
        "homepage": fields.get("Homepage"), "summary": summary, "description": long_text or None,
        "installed_size_kib": int(size) if size and size.isdigit() else None,
        "depends": sorted(set(depends)),
        "updated_at": changes[0].date if changes else None, "synthetic": False,
    }


def synthetic_records(maintainer_id: str) -> list[dict[str, Any]]:
    """Packages that do not exist, with the ids no Debian package name can have."""
    return [{
        "id": identifier, "name": identifier, "version": "1.0", "architecture": "all",
        "section": "misc", "priority": "optional", "source": identifier,
        "maintainer_id": maintainer_id, "homepage": None,
        "summary": f"Synthetic record: {why}",
        "description": f"Synthetic record, not a Debian package: {why}. It is here so that "
                       "every id a JSON API may hold is tried through the gateway.",
        "installed_size_kib": None, "depends": [], "updated_at": None, "synthetic": True,
    } for identifier, why in SYNTHETIC_IDS.items()]


def maintainer_records(installed: list[dict[str, str]]) -> list[dict[str, Any]]:
    packages: dict[str, list[str]] = {}
    names: dict[str, str] = {}
    for fields in installed:
        name, email = maintainer(fields.get("Maintainer", ""))
        packages.setdefault(email, []).append(fields["Package"])
        names.setdefault(email, name)
    return [{"id": email, "name": names[email], "email": email,
             "package_ids": sorted(packages[email]), "package_count": len(packages[email])}
            for email in sorted(packages)]


def build(status: Path = DPKG_STATUS, doc_dir: Path = DOC_DIR,
          changes_per_source: int = CHANGES_PER_SOURCE) -> dict[str, list[dict[str, Any]]]:
    """The database: packages, maintainers and changes, each sorted by id."""
    installed = sorted(
        (s for s in stanzas(status.read_text("utf-8", "replace"))
         if "Package" in s and s.get("Status", "").endswith(" installed")),
        key=lambda s: s["Package"])
    changes = source_changes([s["Package"] for s in installed], doc_dir, changes_per_source)
    packages = [package_record(s, changes.get(s["Package"], [])) for s in installed]
    maintainers = maintainer_records(installed)
    packages += synthetic_records(maintainers[0]["id"])
    unique = {c.record()["id"]: c.record() for found in changes.values() for c in found}
    return {
        "packages": sorted(packages, key=lambda p: p["id"]),
        "maintainers": maintainers,
        "changes": [unique[key] for key in sorted(unique)],
        "notes": [],
    }


def write(db: dict[str, list[dict[str, Any]]], path: Path) -> None:
    path.write_text(json.dumps(db, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="where to write the database (JSON)")
    parser.add_argument("--status", type=Path, default=DPKG_STATUS)
    parser.add_argument("--doc-dir", type=Path, default=DOC_DIR)
    parser.add_argument("--changes-per-source", type=int, default=CHANGES_PER_SOURCE)
    args = parser.parse_args()
    db = build(args.status, args.doc_dir, args.changes_per_source)
    write(db, args.out)
    print(", ".join(f"{len(rows)} {name}" for name, rows in db.items()), "->", args.out)


if __name__ == "__main__":
    main()
