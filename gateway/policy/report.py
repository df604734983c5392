"""`aigw policy report` and the admin `/policy` page: who can see what, as HTML or Markdown.

Every cell is a decision of the bundle itself (gateway.policy.matrix), so the page cannot say
anything the gateway would not do.
"""

from __future__ import annotations

from html import escape
from itertools import groupby
from typing import Any

from gateway.policy.bundle import PolicyBundle
from gateway.policy.matrix import Cell, known_scopes, matrix, personas

_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 2rem; color: #1d232b; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.15rem; margin-top: 2rem; }
table { border-collapse: collapse; margin: .5rem 0 1rem; }
th, td { border: 1px solid #c9d0d8; padding: .3rem .5rem; text-align: left; vertical-align: top; }
th { background: #eef1f4; }
td.allow { background: #e3f4e6; } td.deny { background: #fbe5e5; }
.effect { font-weight: 600; } .fields, .rule { display: block; font-size: 12px; color: #4a5562; }
.rule { font-family: ui-monospace, monospace; color: #6b7683; }
code { font-size: 12px; }
"""


def _rows(bundle: PolicyBundle, settings: Any) -> tuple[list[str], list[list[Cell]]]:
    people = [p.label for p in personas(bundle, known_scopes(settings))]
    cells = sorted(matrix(bundle, settings), key=lambda c: (c.row, people.index(c.persona)))
    rows = [list(group) for _, group in groupby(cells, key=lambda c: c.row)]
    return people, rows


def html_report(bundle: PolicyBundle, settings: Any) -> str:
    people, rows = _rows(bundle, settings)
    head = "".join(f"<th scope='col'>{escape(p)}</th>" for p in people)
    body = []
    for row in rows:
        surface, kind, resource, detail = row[0].row
        label = (f"<th scope='row'>{escape(surface)} · {escape(kind)}<br>"
                 f"<code>{escape(resource)}</code> {escape(detail)}</th>")
        body.append("<tr>" + label + "".join(_html_cell(c) for c in row) + "</tr>")
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<title>aigw access report</title>"
        f"<style>{_STYLE}</style></head><body>"
        "<h1>Who can see what</h1>"
        f"<p>Policy revision <code id='revision'>{escape(bundle.revision)}</code>. Each cell "
        "is the gateway's own decision for that caller; hover a cell for the deciding rule.</p>"
        f"<table id='access'><thead><tr><th>surface · kind · resource</th>{head}</tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table>"
        f"<h2>Rules</h2>{_html_rules(bundle)}</body></html>\n"
    )


def _html_cell(cell: Cell) -> str:
    rule = cell.rule or "default"
    fields = f"<span class='fields'>{escape(', '.join(cell.visible))}</span>" \
        if cell.visible else ""
    return (f"<td class='{cell.effect}' title='{escape(rule)}'>"
            f"<span class='effect'>{cell.effect}</span>{fields}"
            f"<span class='rule'>{escape(rule)}</span></td>")


def _html_rules(bundle: PolicyBundle) -> str:
    rows = "".join(
        f"<tr><td><code>{escape(r.id)}</code></td><td>{escape(r.kind)}</td>"
        f"<td>{escape(r.effect)}</td><td>{escape(r.mode)}</td>"
        f"<td>{escape(r.owner or '')}</td>"
        f"<td>{escape(bundle.files.get(r.id, 'config file'))}</td>"
        f"<td>{escape(r.description)}</td></tr>" for r in bundle.rules)
    return ("<table id='rules'><thead><tr><th>id</th><th>kind</th><th>effect</th><th>mode</th>"
            f"<th>owner</th><th>file</th><th>description</th></tr></thead><tbody>{rows}"
            "</tbody></table>")


def markdown_report(bundle: PolicyBundle, settings: Any) -> str:
    people, rows = _rows(bundle, settings)
    lines = ["# Who can see what", "", f"Policy revision `{bundle.revision}`.", "",
             "| surface · kind · resource | " + " | ".join(people) + " |",
             "|---" * (len(people) + 1) + "|"]
    for row in rows:
        surface, kind, resource, detail = row[0].row
        label = f"{surface} · {kind} · `{resource}` {detail}".rstrip()
        lines.append(f"| {_md(label)} | " + " | ".join(_md_cell(c) for c in row) + " |")
    lines += ["", "## Rules", "", "| id | kind | effect | mode | owner | file | description |",
              "|---|---|---|---|---|---|---|"]
    lines += [f"| `{r.id}` | {r.kind} | {r.effect} | {r.mode} | {_md(r.owner or '')} | "
              f"{bundle.files.get(r.id, 'config file')} | {_md(r.description)} |"
              for r in bundle.rules]
    return "\n".join(lines) + "\n"


def _md_cell(cell: Cell) -> str:
    text = f"**{cell.effect}** ({cell.rule or 'default'})"
    return _md(text + (": " + ", ".join(cell.visible) if cell.visible else ""))


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
