"""Source code as highlighted HTML, made at build time with Pygments, lean: a span only where the style colours the
text, and one span per run of tokens of the same kind (Pygments' own HTML wraps every token, several times the size
of the code)."""
from __future__ import annotations

import html
from functools import cache

from pygments.formatters import HtmlFormatter
from pygments.lexers import CLexer
from pygments.styles import get_style_by_name
from pygments.token import STANDARD_TYPES, Whitespace, _TokenType

STYLE = "default"
CSS_SCOPE = ".hl"


@cache
def _styled() -> frozenset[_TokenType]:
    style = get_style_by_name(STYLE)
    return frozenset(t for t, s in style if t in STANDARD_TYPES and t is not Whitespace
                     and any(s[k] for k in ("color", "bgcolor", "bold", "italic", "underline", "border")))


def _class(t: _TokenType) -> str:
    styled = _styled()
    while t not in styled and t.parent is not None:
        t = t.parent
    return STANDARD_TYPES[t] if t in styled else ""


def highlight_c(src: str) -> str:
    """`src` (C-like kernel source) as <pre class="hl"> HTML."""
    runs: list[list[str]] = []  # [class, text]
    for ttype, value in CLexer().get_tokens(src):
        cls = _class(ttype) if value.strip() else (runs[-1][0] if runs else "")  # spaces join the run they are in
        if runs and runs[-1][0] == cls:
            runs[-1][1] += value
        else:
            runs.append([cls, value])
    body = "".join(f'<span class="{c}">{html.escape(v, False)}</span>' if c else html.escape(v, False)
                   for c, v in runs)
    return f'<pre class="{CSS_SCOPE[1:]}">{body}</pre>'


def code_css() -> str:
    """The style's CSS rules for highlighted code."""
    return HtmlFormatter(style=STYLE).get_style_defs(CSS_SCOPE)
