"""Text from a pickle made safe to show to a person: the one sanitizer of every human-facing output (a terminal, a
CI log, Markdown, HTML, plot labels). Machine-facing outputs (.pftrace, Chrome JSON, CSV, --json) keep the real text.

A name in a pull request's profile is data, and these are what it could otherwise do:
- Control characters (C0 but a newline and a tab in a block, DEL, C1), the Unicode bidi controls and the line and
  paragraph separators move the cursor, erase rows, set a terminal's title, print links, end a CI log's line, or
  reorder what is read. Each is shown as a visible escape (`\\x1b`, `\\u202e`); so are lone surrogates, which no
  output can encode. A backslash is not doubled: shown text is for reading, the JSON outputs have the exact text.
- A GitHub Actions runner reads a workflow command from a line that starts with `::` after white space, or that holds
  `##[` anywhere (its older form); stdout and stderr alike. Such a line shows its first colon as `\\x3a`, and `##[`
  as `#\\x23[`.
- A name of many KB is shown as its first NAME_CHARS characters, an ellipsis and how many were left out.
- Markdown (a pull-request comment) shows a name as literal text: markup characters are backslash-escaped, `<` and
  `&` are entities, and what GitHub links after rendering, whatever the escapes (`@user`, `#123`, bare URLs), is
  broken by a zero-width space, as Renovate's pull-request comments do.
- Names are escaped where a writer puts them in a line (`shown`: a newline in a name cannot start a line of its own,
  and a table is laid out with what is shown); every block printed or written passes `lines` once more.
- matplotlib parses `$…$` as mathtext (an unknown command fails the whole figure, a long formula takes minutes): the
  plots turn that off (PLOT_STYLE) and cut labels to a few dozen characters.
"""
from __future__ import annotations

import re
import string
from typing import Any

NAME_CHARS = 200  # a longer name is shown cut, with the count of what was left out
MESSAGE_CHARS = 1000  # of an error or warning line, or a line of a printed graph
BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"  # marks, overrides, isolates
SEPARATORS = "\u2028\u2029"  # Unicode line and paragraph separators
UNSAFE = "\x00-\x08\x0b-\x1f\x7f-\x9f" + BIDI + SEPARATORS + "\ud800-\udfff"  # in a block: all but \n and \t
_ONE_LINE = re.compile(f"[\t\n{UNSAFE}]")
_BLOCK = re.compile(f"[{UNSAFE}]")
_BLOCK_KEEPING_COLOURS = re.compile(f"(\x1b\\[[0-9;]*m)|[{UNSAFE}]")  # ours: colours on a terminal
_LEGACY_COMMAND, _LEGACY_SHOWN = "##[", "#\\x23["  # the runner finds it anywhere in a line
_COMMAND_LINE = re.compile(r"^((?:\x1b\[[0-9;]*m|[^\S\n])*):(?=:)", re.M)  # `::` after spaces (and our colours)
_COMMAND_NAME = re.compile(r"^(\s*):(?=:)")
ZWSP = "&#8203;"  # a zero-width space, as an entity: visible in the Markdown source, invisible on the page
_MARKDOWN = re.compile(r"[\\`*~\[\]!|$&<@]|_+|#(?=\d)|(?<=[A-Za-z])(?=://)|(?<=[wW]{3})(?=\.)")
_MARKDOWN_START = re.compile(r"^([#>+=-])|^(\d{1,9})(?=[.)])")
ASCII_ALNUM = frozenset(string.ascii_letters + string.digits)
PLOT_STYLE = {"text.parse_math": False}  # matplotlib: `$` is a dollar sign, never the start of a formula


def _escape(m: re.Match) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


_SURROGATE = re.compile("[\ud800-\udfff]")


def unicode(s: str) -> str:
    """`s` with each lone surrogate (a pickle can hold one, no output can encode one) replaced by U+FFFD."""
    return s if s.isascii() else _SURROGATE.sub("\ufffd", s)


def cut(s: str, limit: int | None = NAME_CHARS) -> str:
    """At most `limit` characters of `s`, then an ellipsis and the count of the rest."""
    if limit is None or len(s) <= limit:
        return s
    return f"{s[:limit]}… ({len(s) - limit:,} more characters)"


def shown(s: str, limit: int | None = NAME_CHARS) -> str:
    """A name as one line of visible text, at most `limit` characters of it (None: all): for a terminal, a CI log,
    a table cell, a title. Controls, newlines and tabs included, are shown as escapes; so is what would make a CI
    runner read a line that starts with the name as a workflow command (as `lines` does, but before a table is laid
    out)."""
    out = _ONE_LINE.sub(_escape, cut(s, limit)).replace(_LEGACY_COMMAND, _LEGACY_SHOWN)
    return _COMMAND_NAME.sub(r"\1\\x3a", out, count=1)


def _block_escape(m: re.Match) -> str:
    return m.group(1) or _escape(m)


def lines(block: str) -> str:
    """A block of lines for a terminal, a CI log or a file: no control character but newlines, tabs and colour
    codes (SGR), and no line a CI runner reads as a workflow command. Applying it twice changes nothing more."""
    out = _BLOCK_KEEPING_COLOURS.sub(_block_escape, block) if _BLOCK.search(block) else block
    out = out.replace(_LEGACY_COMMAND, _LEGACY_SHOWN)
    return _COMMAND_LINE.sub(r"\1\\x3a", out)


def _markdown_escape(m: re.Match) -> str:
    c = m.group()
    if not c:  # between a URL's scheme and `://`, or `www` and `.`: GitHub links neither then
        return ZWSP
    if c[0] == "_":  # a run of underscores between letters or digits can neither open nor close emphasis
        before, after = m.string[m.start() - 1:m.start()], m.string[m.end():m.end() + 1]
        return c if before in ASCII_ALNUM and after in ASCII_ALNUM else "\\_" * len(c)
    return {"&": "&amp;", "<": "&lt;", "@": "@" + ZWSP, "#": "#" + ZWSP}.get(c) or "\\" + c


def markdown(s: str, start: bool = False) -> str:
    """Inline Markdown (GitHub's, CommonMark with HTML) that renders `s` as the literal text `shown` gives: no
    heading, emphasis, code, link, image, autolink, HTML, math, table cell break, mention or issue reference.
    `start`: `s` begins a line, where `#`, `>`, `-`, `+`, `=` and `1.` would start a block."""
    out = _MARKDOWN.sub(_markdown_escape, shown(s, None))
    return _MARKDOWN_START.sub(lambda m: "\\" + m.group() if m.group(1) else m.group() + "\\", out) if start else out


def plot_label(s: str, limit: int) -> str:
    """A label of a plot: controls shown as escapes, at most `limit` characters (cut with an ellipsis). Math is off
    in the plots' style (PLOT_STYLE), so `$` stays a dollar sign."""
    t = shown(s[:limit + 1], None)
    return t if len(t) <= limit else t[:limit - 1] + "…"


def html_value(x: Any) -> Any:
    """Jinja's finalize: a text put in a page keeps newlines and tabs (listings) but no other control character; the
    template's autoescape then makes it HTML. Markup (marked safe: our own) passes unchanged."""
    if not isinstance(x, str) or hasattr(x, "__html__"):
        return x
    return _BLOCK.sub(_escape, x) if _BLOCK.search(x) else x


_JSON_UNSAFE = re.compile("[\x7f-\x9f" + BIDI + SEPARATORS + "\ud800-\udfff]")


def json_text(s: str) -> str:
    """JSON written with ensure_ascii=False, printed: what JSON leaves raw but a terminal acts on (DEL, C1, bidi
    controls, separators, lone surrogates) as \\u escapes, which decode to the same text."""
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", s)
