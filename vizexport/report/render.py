"""Sections as plain text (a terminal, a CI log) and as GitHub Markdown (a pull-request comment). Names in cells
and the headline are already shown text (text.shown); each writer makes its whole output safe once more at its end
(text.lines), and Markdown escapes every text it puts in (text.markdown)."""
from __future__ import annotations

import textwrap

from ..analysis.tables import WIDTH as TERMINAL  # columns of a text table, as `top`'s
from ..analysis.tables import fit
from ..text import lines, markdown, shown
from .tables import Section, Table

WIDTH = 110  # notes are wrapped to this
CELL = 60  # longest cell text on a terminal (longer ones are cut in the middle with …, their ends kept)
NARROWEST = 16  # a text column is cut no narrower than this to fit TERMINAL
GAP = 2  # spaces between columns
MD_ROWS = 100  # rows of a Markdown table (a pull-request comment holds at most 65,536 characters)


def as_text(title: str, headline: str, sections: list[Section], full: bool = False) -> str:
    out = [shown(title, None), *textwrap.wrap(shown(headline, None), TERMINAL), ""]
    for s in sections:
        out += [s.title, "-" * len(s.title)]
        if s.note:
            out += textwrap.wrap(s.note, WIDTH)
        for t in s.tables:
            out += _text_table(t, full)
        out.append("")
    return lines("\n".join(out).rstrip() + "\n")


def _text_table(t: Table, full: bool) -> list[str]:
    rows = t.rows if full or t.limit is None else t.rows[:t.limit]
    if not rows:
        return ["(none)"]
    cap = CELL if len(t.headers) > 2 else TERMINAL  # a name and its value: the value may take the line
    cells = [[_fit(c[0].replace("\n", " "), cap) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(t.headers)]
    right = [t.numeric(i) for i in range(len(t.headers))]
    kept = _fitting(t, widths, right)

    def line(values: list[str]) -> str:
        return "  ".join(_fit(values[i], widths[i]).rjust(widths[i]) if right[i] else
                         _fit(values[i], widths[i]).ljust(widths[i]) for i in kept).rstrip()
    out = [line(t.headers)] if any(t.headers) else []
    out += [line(r) for r in cells]
    if len(rows) < len(t.rows):
        out.append(f"… {len(t.rows) - len(rows)} more (the .json and .html outputs have them all)")
    return out


def _fit(value: str, width: int) -> str:
    """A cell in `width` characters: a path loses its start (its file and line are at its end), other text its
    middle (a program key at the end stays)."""
    if value.startswith("/") and len(value) > width:
        return "…" + value[len(value) - width + 1:]
    return fit(value, width)


def _fitting(t: Table, widths: list[int], right: list[bool]) -> list[int]:
    """The columns a terminal shows, narrowing `widths` in place, so that a line fits TERMINAL columns: the table's
    optional columns go first, then the text columns are cut, the widest a character at a time (they end up alike),
    none narrower than NARROWEST."""
    kept = list(range(len(widths)))

    def total() -> int:
        return sum(widths[i] for i in kept) + GAP * (len(kept) - 1)
    for group in t.optional:
        if total() <= TERMINAL:
            break
        kept = [i for i in kept if i not in group]
    while total() > TERMINAL:
        widest = max((i for i in kept if not right[i]), key=lambda i: widths[i], default=None)
        if widest is None or widths[widest] <= NARROWEST:
            break
        widths[widest] -= 1
    return kept


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
