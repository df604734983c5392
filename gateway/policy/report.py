"""`aigw policy report` and the admin `/policy` page: who can see what, for an auditor.

Every cell is a decision of the bundle itself (`matrix.decide_cell`), so the report cannot say
anything the gateway would not do. An auditor reads it on paper as often as on a screen, so it
states what it was made from (the config file, the policies' revision, the gateway's version,
when), says what each column and cell means, and is cut into tables that fit a page: one per
surface, its callers split into groups of at most `CALLERS_PER_TABLE` columns, each group
repeating the row header. This module lays the report out and writes it as Markdown;
gateway.policy.report_html writes the same layout as a page that prints on A4.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Final

from gateway import registry
from gateway.loader import LoadedConfig
from gateway.model import TokenKind
from gateway.policy.bundle import PolicyBundle
from gateway.policy.matrix import Cell, Persona, known_scopes, matrix, personas

CALLERS_PER_TABLE: Final = 4  # beside the row header, what fits 800 px and an A4 page
GATEWAY_SURFACE = "gateway"  # rows no surface serves: the gateway's own, passthrough
_GATEWAY_MEANING = ("Paths no surface serves (passed through to the upstream once the route "
                    "rules admit the caller), and resources no surface declares.")
CELLS_MEAN = (
    "Each cell is the decision the gateway itself takes for that caller on that row (the same "
    "engine and rules it serves with): ALLOW or DENY, written out, with the HTTP status a "
    "refused route answers (401: a token is needed; 403: this token may not); the id of the "
    "rule that decided it, or `default` when no rule selects the row and the kind's default "
    "applies; and, where allowed, what the caller gets: fields, `vectors` (stored embeddings), "
    "`records:<visibility>` (records of that visibility) or limits (`max_chunks=4`).")
ROWS_MEAN = (
    "Each row is one question: a rule kind, the resource it is about (a path, a collection or "
    "source, a stream, an agent) and the attributes decided for. A route row names the HTTP "
    "method: a route rule naming none is tried with the methods the surfaces serve under its "
    "path, else GET (GET covers HEAD).")
CALLERS_MEAN = (
    "Scopes tried are those the rules name and those the config can grant (route rules, API "
    "keys, scope grants, demo clients).")


@dataclass(frozen=True, slots=True)
class Facts:
    """What a report was made from, stated at its top."""

    config: str
    policies: str
    revision: str
    version: str
    generated: datetime

    def items(self) -> list[tuple[str, str]]:
        return [("Generated", self.generated.strftime("%Y-%m-%d %H:%M:%S UTC")),
                ("Config file", self.config), ("Policies", self.policies),
                ("Policy revision", self.revision), ("aigw version", self.version)]


def facts(loaded: LoadedConfig, policies: Path | None) -> Facts:
    """The facts of a report of `loaded` (its bundle) with the policies read from `policies`,
    made now."""
    revision = loaded.bundle.revision if loaded.bundle is not None else "none"
    return Facts(str(loaded.path.resolve()), str(policies) if policies else "none", revision,
                 gateway_version(), datetime.now(UTC))


def gateway_version() -> str:
    try:
        return version("aigw")
    except PackageNotFoundError:
        return "unknown"


@dataclass(frozen=True, slots=True)
class Table:
    """One surface's rows for a group of callers (`first`..`last` of `of`, counted from 1)."""

    surface: str
    callers: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    first: int
    last: int
    of: int

    @property
    def caption(self) -> str:
        if self.first == 1 and self.last == self.of:
            return f"{self.surface}, every caller"
        return f"{self.surface}, callers {self.first} to {self.last} of {self.of}"


@dataclass(frozen=True, slots=True)
class Section:
    surface: str
    meaning: str
    tables: tuple[Table, ...]


@dataclass(frozen=True, slots=True)
class Layout:
    """The report: its callers with what each stands for, the kinds its rows ask about, and a
    section of tables per surface."""

    callers: tuple[tuple[str, str], ...]
    kinds: tuple[tuple[str, str], ...]
    sections: tuple[Section, ...]


def layout(bundle: PolicyBundle, settings: Any) -> Layout:
    people = personas(bundle, known_scopes(settings))
    rows: dict[tuple[str, str, str, str], dict[str, Cell]] = {}
    for cell in matrix(bundle, settings, people):  # each one `matrix.decide_cell`
        rows.setdefault(cell.row, {})[cell.persona] = cell
    labels = tuple(p.label for p in people)
    order = {key: index for index, key in enumerate(rows)}  # a kind's samples in their order
    by_surface: dict[str, list[tuple[Cell, ...]]] = {}
    for key in sorted(rows, key=lambda k: (k[1], k[2], order[k])):
        by_surface.setdefault(key[0], []).append(tuple(rows[key][label] for label in labels))
    sections = tuple(
        Section(surface, _surface_meaning(surface), _tables(surface, labels, by_surface[surface]))
        for surface in sorted(by_surface, key=lambda s: (s == GATEWAY_SURFACE, s)))
    kinds = sorted({key[1] for key in rows})
    return Layout(tuple((p.label, caller_meaning(p)) for p in people),
                  tuple((k, bundle.kinds[k].summary) for k in kinds), sections)


def _tables(surface: str, callers: tuple[str, ...],
            rows: Sequence[tuple[Cell, ...]]) -> tuple[Table, ...]:
    """The callers in even groups of at most CALLERS_PER_TABLE (7 as 4 + 3, 9 as 3 + 3 + 3)."""
    count = -(-len(callers) // CALLERS_PER_TABLE)
    size = -(-len(callers) // count)
    return tuple(Table(surface, callers[start:start + size],
                       tuple(row[start:start + size] for row in rows),
                       start + 1, min(start + size, len(callers)), len(callers))
                 for start in range(0, len(callers), size))


def _surface_meaning(name: str) -> str:
    if name == GATEWAY_SURFACE:
        return _GATEWAY_MEANING
    found = next((s for s in registry.surfaces() if s.name == name), None)
    return found.config_description if found is not None else ""


def caller_meaning(persona: Persona) -> str:
    """What a caller column stands for, read from the principal its decisions are taken for."""
    who = persona.principal
    if who.is_anonymous:
        return "a caller without a token"
    token = "an owner token (the person the data is about)" if who.kind is TokenKind.OWNER \
        else "a client token"
    if who.client_id:
        token += f" whose client_id is {who.client_id},"
    scopes = ", ".join(sorted(who.scopes))
    return f"{token} with exactly these scopes: {scopes}" if scopes else f"{token} with no scope"


def effect_text(cell: Cell) -> str:
    """ALLOW or DENY, and a refused route's HTTP status."""
    return cell.effect.upper() + (f" {cell.answer}" if cell.answer else "")


def cell_rule(cell: Cell) -> str:
    return cell.rule or "default"


def file_of(bundle: PolicyBundle, rule_id: str) -> str:
    return bundle.files.get(rule_id, "config file")


def markdown_report(bundle: PolicyBundle, settings: Any, about: Facts) -> str:
    found = layout(bundle, settings)
    lines = ["# Who can see what", "", "The aigw access report.", ""]
    lines += [f"- {name}: `{value}`" for name, value in about.items()]
    lines += ["", "## How to read it", "", "**Callers** (the columns). " + CALLERS_MEAN, ""]
    lines += [f"- **{label}**: {meaning}" for label, meaning in found.callers]
    lines += ["", "**Cells.** " + CELLS_MEAN, "", "**Rows.** " + ROWS_MEAN, ""]
    lines += [f"- `{kind}`: {summary}" for kind, summary in found.kinds]
    for section in found.sections:
        lines += ["", f"## {section.surface}", "", section.meaning]
        for table in section.tables:
            lines += ["", f"**{table.caption}**", "", *_md_table(table)]
    lines += ["", "## Rules", "", "| id | kind | effect | mode | owner | file | description |",
              "|---|---|---|---|---|---|---|"]
    lines += [f"| `{r.id}` | {r.kind} | {r.effect} | {r.mode} | {_md(r.owner or '—')} | "
              f"{file_of(bundle, r.id)} | {_md(r.description)} |" for r in bundle.rules]
    return "\n".join(lines) + "\n"


def _md_table(table: Table) -> list[str]:
    lines = [f"| {table.surface} · kind · resource | " + " | ".join(table.callers) + " |",
             "|---" * (len(table.callers) + 1) + "|"]
    for row in table.rows:
        label = f"{row[0].kind} · `{row[0].resource}` {row[0].detail}".rstrip()
        lines.append(f"| {_md(label)} | " + " | ".join(_md_cell(c) for c in row) + " |")
    return lines


def _md_cell(cell: Cell) -> str:
    text = f"**{effect_text(cell)}** ({cell_rule(cell)})"
    return _md(text + (": " + ", ".join(cell.visible) if cell.visible else ""))


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
