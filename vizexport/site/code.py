"""Source code as highlighted HTML, made at build time with Pygments, lean: a span only where the style colours the
text, and one span per run of tokens of the same kind (Pygments' own HTML wraps every token, several times the size
of the code)."""
from __future__ import annotations

import html
from collections.abc import Iterator
from functools import cache
from itertools import groupby
from operator import itemgetter

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


@cache
def _class(t: _TokenType) -> str:
    styled = _styled()
    while t not in styled and t.parent is not None:
        t = t.parent
    return STANDARD_TYPES[t] if t in styled else ""


def _classed(src: str) -> Iterator[tuple[str, str]]:
    """(class, text) of each token; spaces take the class of the token before them, so that they join its run."""
    cls = ""
    for ttype, value in CLexer().get_tokens(src):
        if value.strip():
            cls = _class(ttype)
        yield cls, value


def highlight_c(src: str) -> str:
    """`src` (C-like kernel source) as <pre class="hl"> HTML: one span per run of tokens of one class."""
    runs = ((c, html.escape("".join(v for _, v in run), False)) for c, run in groupby(_classed(src), itemgetter(0)))
    body = "".join(f'<span class="{c}">{v}</span>' if c else v for c, v in runs)
    return f'<pre class="{CSS_SCOPE[1:]}">{body}</pre>'


def code_css() -> str:
    """The style's CSS rules for highlighted code."""
    return HtmlFormatter(style=STYLE).get_style_defs(CSS_SCOPE)
