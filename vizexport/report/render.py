"""Sections as plain text (a terminal, a CI log) and as GitHub Markdown (a pull-request comment). Names in cells
and the headline are already shown text (text.shown); each writer makes its whole output safe once more at its end
(text.lines), and Markdown escapes every text it puts in (text.markdown)."""
from __future__ import annotations

import textwrap

from ..text import lines, markdown, shown
from .tables import Section, Table

WIDTH = 110  # notes are wrapped to this
CELL = 60  # longest cell text on a terminal (longer ones are cut with …)
MD_ROWS = 100  # rows of a Markdown table (a pull-request comment holds at most 65,536 characters)


def as_text(title: str, headline: str, sections: list[Section], full: bool = False) -> str:
    out = [shown(title, None), shown(headline, None), ""]
    for s in sections:
        out += [s.title, "-" * len(s.title)]
        if s.note:
            out += textwrap.wrap(s.note, WIDTH)
        for t in s.tables:
            out += _text_table(t, full)
        out.append("")
    return lines("\n".join(out).rstrip() + "\n")


def _cut(s: str) -> str:
    s = s.replace("\n", " ")
    return s if len(s) <= CELL else s[:CELL - 1] + "…"


def _text_table(t: Table, full: bool) -> list[str]:
    rows = t.rows if full or t.limit is None else t.rows[:t.limit]
    if not rows:
        return ["(none)"]
    cells = [[_cut(c[0]) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(t.headers)]
    right = [t.numeric(i) for i in range(len(t.headers))]

    def line(values: list[str]) -> str:
        cols = zip(values, widths, right, strict=True)
        return "  ".join(v.rjust(w) if r else v.ljust(w) for v, w, r in cols).rstrip()
    out = [line(t.headers)] if any(t.headers) else []
    out += [line(r) for r in cells]
    if len(rows) < len(t.rows):
        out.append(f"… {len(t.rows) - len(rows)} more (the .json and .html outputs have them all)")
    return out


def as_markdown(title: str, headline: str, sections: list[Section]) -> str:
    out = [f"## {markdown(title)}", "", markdown(headline, start=True), ""]
    for s in sections:
        body = ([markdown(s.note, start=True), ""] if s.note else []) + [line for t in s.tables
                                                                          for line in [*_md_table(t), ""]]
        if s.collapsed:  # our own titles: an HTML block shows its text as it is
            out += [f"<details><summary><b>{s.title}</b></summary>", "", *body, "</details>", ""]
        else:
            out += [f"### {markdown(s.title)}", "", *body]
    return lines("\n".join(out).rstrip() + "\n")


def _md_table(t: Table) -> list[str]:
    if not t.rows:
        return ["(none)"]
    headers = [h or " " for h in t.headers]
    out = ["| " + " | ".join(map(markdown, headers)) + " |",
           "|" + "|".join("---:" if t.numeric(i) else "---" for i in range(len(headers))) + "|"]
    out += ["| " + " | ".join(markdown(c[0]) for c in r) + " |" for r in t.rows[:MD_ROWS]]
    if len(t.rows) > MD_ROWS:
        out += ["", f"… {len(t.rows) - MD_ROWS} more rows in the .json and .html outputs."]
    return out
