"""Writers of the answers (analysis.report.Report, analysis.diff.Diff): plain text for a terminal or a CI log,
Markdown for a pull-request comment, JSON (the records as they are), and one self-contained HTML file with SVG plots
(the command's writers, writers.py, pick one by the output's name).
The site (vizexport/site) shows the same sections and plots as pages of its own."""
from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import jinja2

from .._version import __version__
from ..analysis.diff import Diff
from ..analysis.report import Report
from ..records import to_json
from ..text import html_value, shown
from . import diff_sections, run_sections
from .render import as_markdown, as_text
from .tables import Section

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


def _page(x: Report | Diff) -> tuple[str, str, list[Section]]:
    """A report's or a diff's title, headline and sections."""
    if isinstance(x, Diff):
        return diff_title(x), diff_sections.verdict_counts(x), diff_sections.sections(x)
    return report_title(x), run_sections.headline(x), run_sections.sections(x)


def answer_json(x: Report | Diff) -> str:
    """The records as they are (a report.json or diff.json)."""
    return json.dumps(to_json(x), indent=1, allow_nan=False)


def answer_markdown(x: Report | Diff) -> str:
    """A pull-request comment."""
    return as_markdown(*_page(x))


def answer_html(x: Report | Diff) -> str:
    """One HTML file, its plots inlined as SVG."""
    from .plots import diff_plots, report_plots  # matplotlib: imported only to draw
    title, headline, sections = _page(x)
    plots = diff_plots(x) if isinstance(x, Diff) else report_plots(x)
    return standalone(title, title.split(":")[0].lower(), headline, sections, plots)


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
