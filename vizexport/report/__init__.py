"""Writers of the answers (analysis.report.Report, analysis.diff.Diff): plain text for a terminal or a CI log,
Markdown for a pull-request comment, JSON (the records as they are), and one self-contained HTML file with SVG plots.
The site (vizexport/site) shows the same sections and plots as pages of its own."""
from __future__ import annotations

import json
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2

from .._version import __version__
from ..analysis.diff import Diff
from ..analysis.report import Report
from ..errors import InputError
from ..output import write_atomic
from ..records import to_json
from ..text import html_value, shown
from . import diff_sections, run_sections
from .render import as_markdown, as_text
from .tables import Section

FORMATS = (".html", ".json", ".md")
REPORT_TITLE, DIFF_TITLE = "Run report", "Diff"


def report_text(r: Report, full: bool = False) -> str:
    return as_text(f"{REPORT_TITLE}: {r.file}", run_sections.headline(r), run_sections.sections(r), full)


def diff_text(d: Diff, full: bool = False) -> str:
    return as_text(f"{DIFF_TITLE}: {d.base.file} → {d.pr.file}", diff_sections.verdict_counts(d),
                   diff_sections.sections(d), full)


def report_title(r: Report) -> str:
    return f"{REPORT_TITLE}: {_run_name(r.file)}"


def diff_title(d: Diff) -> str:
    return f"{DIFF_TITLE}: {_run_name(d.base.file)} → {_run_name(d.pr.file)}"


def _run_name(file: str) -> str:
    """A run by its folder's name where its file has tinygrad's name (profile.pkl, profile.pkl.<user>), else by
    its file name."""
    p = Path(file)
    return p.parent.name if p.name.split(".")[0] == "profile" and p.parent.name else p.name


def write_report(r: Report, path: Path) -> None:
    """`path`'s suffix picks the format: .html, .json or .md."""
    from .plots import report_plots  # matplotlib: imported only to draw
    _write(path, r, report_title(r), run_sections.headline(r), run_sections.sections(r), report_plots)


def write_diff(d: Diff, path: Path) -> None:
    from .plots import diff_plots
    _write(path, d, diff_title(d), diff_sections.verdict_counts(d), diff_sections.sections(d), diff_plots)


def check_output(path: Path) -> None:
    """Refuse an output name of an unknown format, or one that names anything but a regular file."""
    if path.suffix.lower() not in FORMATS:
        raise InputError(f"{path}: unknown output format (name a {', '.join('*' + f for f in FORMATS)} file)")
    if path.exists() and not path.is_file():
        raise InputError(f"{path}: is not a regular file (vizexport only replaces regular files)")


def _write(path: Path, x: Report | Diff, title: str, headline: str, sections: list[Section],
           plots: Callable[[Any], dict[str, str]]) -> None:
    check_output(path)
    suffix = path.suffix.lower()
    if suffix == ".json":
        data = json.dumps(to_json(x), indent=1, allow_nan=False)
    elif suffix == ".md":
        data = as_markdown(title, headline, sections)
    else:
        data = standalone(title, title.split(":")[0].lower(), headline, sections, plots(x))
    write_atomic(path, data.encode())


def environment(loader: jinja2.BaseLoader | None = None) -> jinja2.Environment:
    """A Jinja environment that finds this package's templates (and, with `loader`, others first). Every value a
    page shows passes text.html_value (no control character) and then autoescape (HTML, attributes included)."""
    own = jinja2.PackageLoader("vizexport.report", "templates")
    env = jinja2.Environment(loader=jinja2.ChoiceLoader([loader, own]) if loader else own, finalize=html_value,
                             autoescape=jinja2.select_autoescape(["html"]), keep_trailing_newline=True)
    env.filters["shown"] = shown  # a page's <title>: one bounded line
    return env


def standalone(title: str, kind: str, headline: str, sections: list[Section], plots: dict[str, str]) -> str:
    """One HTML file: the site's style and table sorting inlined, plots inlined as SVG."""
    static = resources.files("vizexport.site").joinpath("static")
    css, js = (static.joinpath(n).read_text() for n in ("site.css", "site.js"))
    return environment().get_template("standalone.html").render(
        title=title, kind=kind, headline=headline, sections=sections, plots=plots, css=css,
        js=js.replace("</", "<\\/"), version=__version__)
