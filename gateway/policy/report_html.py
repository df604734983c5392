"""The access report as one HTML page that reads on a screen 800 px wide and prints on A4
(gateway.policy.report lays it out): fixed-width tables that wrap long names instead of
growing, header rows repeated on each printed page, no row cut across pages, and every
effect written as a word, so the page means the same in black and white."""

from __future__ import annotations

import re
from html import escape
from typing import Any

from gateway.policy.bundle import PolicyBundle
from gateway.policy.matrix import Cell
from gateway.policy.report import (
    CALLERS_MEAN,
    CALLERS_PER_TABLE,
    CELLS_MEAN,
    ROWS_MEAN,
    Facts,
    Table,
    cell_rule,
    effect_text,
    file_of,
    layout,
)

# Column widths in % of the page: the row header, and each caller column.
_ROW_HEADER, _CALLER = 24, (100 - 24) // CALLERS_PER_TABLE

_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 2rem; color: #1d232b; max-width: 64rem; }
h1 { font-size: 1.5rem; margin: 0 0 .25rem; }
h2 { font-size: 1.2rem; margin: 2rem 0 .25rem; break-after: avoid; }
h3 { font-size: 1rem; margin: 1rem 0 .25rem; break-after: avoid; }
p { margin: .25rem 0 .5rem; }
code { font: 12px ui-monospace, monospace; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .1rem 1rem; margin: .5rem 0; }
dt { font-weight: 600; } dd { margin: 0; overflow-wrap: anywhere; }
table { border-collapse: collapse; table-layout: fixed; margin: .25rem 0 1.25rem; }
caption { caption-side: top; text-align: left; font-weight: 600; padding: .25rem 0; }
th, td { border: 1px solid #8d97a3; padding: .25rem .4rem; text-align: left;
         vertical-align: top; overflow-wrap: anywhere; }
thead th { background: #eef1f4; }
thead { display: table-header-group; }
tr { break-inside: avoid; }
tbody th { font-weight: normal; }
td.allow { background: #e3f4e6; } td.deny { background: #fbe5e5; }
.effect { font-weight: 700; letter-spacing: .03em; }
.kind, .detail, .rule, .fields { display: block; font-size: 12px; }
.kind { color: #4a5562; } .rule { font-family: ui-monospace, monospace; color: #3d4753; }
@page { size: A4; margin: 14mm 12mm; }
@media print {
  body { margin: 0; max-width: none; font-size: 9pt; }
  code, .kind, .detail, .rule, .fields { font-size: 7.5pt; }
  #legend { break-after: page; }
  td.allow, td.deny, thead th { print-color-adjust: exact; -webkit-print-color-adjust: exact; }
}
"""


def html_report(bundle: PolicyBundle, settings: Any, about: Facts) -> str:
    found = layout(bundle, settings)
    callers = "".join(f"<dt>{escape(label)}</dt><dd>{escape(meaning)}</dd>"
                      for label, meaning in found.callers)
    kinds = "".join(f"<dt><code>{escape(kind)}</code></dt><dd>{escape(summary)}</dd>"
                    for kind, summary in found.kinds)
    sections = "".join(
        f"<section class='surface' id='surface-{_slug(s.surface)}'><h2>{escape(s.surface)}</h2>"
        f"<p>{escape(s.meaning)}</p>{''.join(_table(t) for t in s.tables)}</section>"
        for s in found.sections)
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>aigw access report {escape(bundle.revision)}</title>"
        f"<style>{_STYLE}</style></head><body>"
        "<header><h1>Who can see what</h1><p>The aigw access report.</p>"
        f"{_facts(about)}</header>"
        "<section id='legend'><h2>How to read it</h2>"
        f"<h3>Callers (the columns)</h3><p>{escape(CALLERS_MEAN)}</p><dl>{callers}</dl>"
        f"<h3>Cells</h3><p>{_code(CELLS_MEAN)}</p>"
        f"<h3>Rows</h3><p>{_code(ROWS_MEAN)}</p><dl>{kinds}</dl></section>"
        f"{sections}<section id='rules'><h2>Rules</h2>{_rules(bundle)}</section>"
        "</body></html>\n"
    )


def _facts(about: Facts) -> str:
    ids = {"Generated": "generated", "Config file": "config", "Policies": "policies",
           "Policy revision": "revision", "aigw version": "version"}
    return "<dl id='facts'>" + "".join(
        f"<dt>{name}</dt><dd><code id='{ids[name]}'>{escape(value)}</code></dd>"
        for name, value in about.items()) + "</dl>"


def _table(table: Table) -> str:
    columns = len(table.callers)
    width = _ROW_HEADER + _CALLER * columns
    cols = f"<col style='width:{100 * _ROW_HEADER / width:.2f}%'>" + "".join(
        f"<col style='width:{100 * _CALLER / width:.2f}%'>" for _ in table.callers)
    head = "".join(f"<th scope='col'>{escape(c)}</th>" for c in table.callers)
    body = "".join("<tr>" + _row_header(row[0]) + "".join(_cell(c) for c in row) + "</tr>"
                   for row in table.rows)
    return (f"<table class='access' style='width:{width}%'><caption>{escape(table.caption)}"
            f"</caption><colgroup>{cols}</colgroup><thead><tr><th scope='col'>kind · resource"
            f"</th>{head}</tr></thead><tbody>{body}</tbody></table>")


def _row_header(cell: Cell) -> str:
    detail = f"<span class='detail'>{escape(cell.detail)}</span>" if cell.detail else ""
    return (f"<th scope='row'><span class='kind'>{escape(cell.kind)}</span>"
            f"<code>{_wrap(cell.resource, after='/')}</code>{detail}</th>")


def _cell(cell: Cell) -> str:
    rule = cell_rule(cell)
    fields = f"<span class='fields'>{escape(', '.join(cell.visible))}</span>" \
        if cell.visible else ""
    return (f"<td class='{cell.effect}' title='{escape(rule)}'>"
            f"<span class='effect'>{effect_text(cell)}</span>"
            f"<span class='rule'>{_wrap(rule)}</span>{fields}</td>")


def _rules(bundle: PolicyBundle) -> str:
    widths = (30, 10, 22, 12, 26)  # rule and kind, effect and mode, owner, file, description
    cols = "".join(f"<col style='width:{w}%'>" for w in widths)
    rows = "".join(
        f"<tr><td><code>{_wrap(r.id)}</code><span class='kind'>{escape(r.kind)}</span></td>"
        f"<td>{escape(r.effect)}<span class='kind'>{escape(r.mode)}</span></td>"
        f"<td>{_wrap(r.owner or '—')}</td><td>{escape(file_of(bundle, r.id))}</td>"
        f"<td>{escape(r.description)}</td></tr>" for r in bundle.rules)
    return (f"<table id='rule-list' style='width:100%'><colgroup>{cols}</colgroup><thead><tr>"
            "<th scope='col'>rule · kind</th><th scope='col'>effect · mode</th>"
            "<th scope='col'>owner</th><th scope='col'>file</th>"
            f"<th scope='col'>description</th></tr></thead><tbody>{rows}</tbody></table>")


def _wrap(text: str, after: str = ".:") -> str:
    """Escaped, with a line break allowed after each of `after` (/ in a path, . and : in a
    rule id) and before an @, so that long names wrap where a reader expects."""
    marks = re.escape(after + "@")
    return re.sub(f"[{marks}]", lambda m: "<wbr>@" if m[0] == "@" else m[0] + "<wbr>",
                  escape(text))


def _code(text: str) -> str:
    """Markdown's `code` spans of a legend sentence as <code>."""
    parts = escape(text).split("`")
    return "".join(f"<code>{part}</code>" if index % 2 else part
                   for index, part in enumerate(parts))


def _slug(text: str) -> str:
    """An HTML id from a surface label ("one, two" -> "one-two")."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
