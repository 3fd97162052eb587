"""Every output of every command, in one registry (as pyinstrument's renderers): each writer says which command it
serves, what it writes — files of its suffixes, a folder, or text on stdout (a format name) — whether that is binary,
and which parts of the Run it reads. The command classifies its output once (`classify`), picks the writer
(`writer_for`; where two take a folder, the Run's inputs decide: a profile makes a site, rewrites alone the SVG
export), derives what the writer reads and lets it write.

To add an output format: a Writer subclass here, listed in WRITERS (a trace format: a perfetto.TraceWriter, listed in
perfetto.WRITERS, comes in through `Trace`). A writer imports what it writes with when it writes (the site, Graphviz,
jinja2, the report's renderers): a command loads only its own writer's modules (`top` is mostly its load).
"""
from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .analysis import tables
from .analysis.top import launches_note
from .errors import InputError
from .gcpause import gc_paused
from .output import Progress, atomic_folder, write_atomic
from .perfetto import GZ, TraceWriter, write_file, write_trace
from .perfetto import WRITERS as TRACE_WRITERS
from .perfetto.split import SplitOptions, write_split
from .progress import PERCENT, Phase
from .records import RewriteLog
from .run import Run
from .text import json_text, lines, shown

if TYPE_CHECKING:
    from .site import Pages, SiteOptions

STDOUT, FILE, FOLDER = "stdout", "file", "folder"
TEXT = "text"  # the stdout format of a command without --json / --csv
TOP_TEXT_ROWS = 20  # `top` as text: the 20 longest kernels unless -n
DEMO_TRACE = "trace.json.gz"
NOT_A_FILE = "is not a regular file (vizexport only replaces regular files)"
SITE_PHASE = ("writing rewrite contexts", " contexts")  # the site's progress: contexts whose step data is written


@dataclass(frozen=True)
class Target:
    """An output as classified once: text on stdout (`fmt` names its format), a file of one of a writer's
    suffixes (`suffix`, lower case), or a folder. `name` is the output as the user gave it (messages quote it)."""

    kind: str
    path: Path | None = None
    suffix: str = ""
    fmt: str = TEXT
    name: str = ""

    @property
    def gz(self) -> bool:
        return self.suffix.endswith(GZ)


class Writer:
    """One output. `command`: the command it serves; `kind`: FILE (named by one of `suffixes`), FOLDER or STDOUT
    (the format `fmt`); `binary`: what its files hold; `reads`: the Run's parts it reads, derived in this order before
    it writes; `progress`: the phases of its writing, each a progress bar's label and unit (progress.Phase; None:
    it reports none); `warm`: see site.warm_plots."""

    command: str = ""
    kind: str = FILE
    suffixes: tuple[str, ...] = ()
    fmt: str = TEXT
    binary: bool = False
    reads: tuple[str, ...] = ()
    progress: tuple[Phase, ...] | None = None
    warm: bool = False  # it may draw plots: a helper importing matplotlib is forked while the inputs load

    def takes(self, target: Target) -> bool:
        return target.kind == self.kind and (target.suffix in self.suffixes if self.kind == FILE else
                                             target.fmt == self.fmt if self.kind == STDOUT else True)

    def accepts(self, run: Run) -> bool:
        """Whether it takes the run's inputs, where several writers take one output (a folder)."""
        return True

    def check(self, run: Run, target: Target) -> None:
        """Refuse options it cannot honour, before any input is read."""

    def write(self, run: Run, target: Target, progress: Progress | None = None) -> str:
        """Write the output; return what the command prints (the output itself on stdout, or what was written)."""
        raise NotImplementedError


# --- convert: traces, the site, the SVG export ------------------------------------------------------------------
class Trace(Writer):
    """A trace file in one of perfetto's formats (its suffix, or with .gz); above TraceOptions.window_events events
    (and no flavour) an overview and windows beside it."""

    command, reads, progress = "convert", ("timeline",), (("writing", " events"),)

    def __init__(self, fmt: type[TraceWriter]) -> None:
        self.format, self.suffixes, self.binary = fmt, (fmt.suffix, fmt.suffix + GZ), fmt.binary

    def check(self, run: Run, target: Target) -> None:
        a, flavor = run.answers, run.trace.flavor
        if run.baseline is not None or a.peak_gflops or a.peak_gbs:
            raise InputError(f"{target.name}: --baseline and --peak-* make site pages: name a folder (-o OUTDIR/)")
        if flavor is not None and flavor not in self.format.flavors:
            raise InputError(f"{target.path}: --flavor {flavor} writes Chrome JSON (name a .json or .json.gz output)")
        if run.trace.delta_time and not self.format.writes_deltas:
            raise InputError(f"{target.path}: --delta-time is for a .pftrace or .pftrace.gz trace")

    def write(self, run: Run, target: Target, progress: Progress | None = None) -> str:
        tl, opts, path = run.timeline, run.trace, target.path
        assert path is not None
        n, what = tl.n_events(), ""
        with gc_paused():  # millions of acyclic objects: see gcpause
            if opts.window_events is not None and n > opts.window_events and opts.flavor is None:
                split = write_split(tl, path, SplitOptions(opts.window_events, opts.compress,
                                                           delta_time=opts.delta_time), progress, run.executor)
                size, what = split.bytes, (f"the overview, and {len(split.windows)} windows in "
                                           f"{split.folder}{os.sep} (index.json lists them)")
            else:
                writer = self.format(opts.compress and not target.gz, opts.flavor, run.executor, opts.delta_time)
                size = write_file(writer, target.gz, tl, path, progress)
        prof = run.need_profile()
        return lines(f"wrote {path}{': ' + what if what else ''}: {n:,} events on {len(tl.tracks)} tracks, "
                     f"{size:,} bytes ({size / max(prof.n_events, 1):.1f} B/profile event) in {run.seconds():.2f} s\n")


class _Folder(Writer):
    command, kind, progress, warm = "convert", FOLDER, (SITE_PHASE,), True

    def check(self, run: Run, target: Target) -> None:
        if run.trace.flavor:
            raise InputError(f"{target.name}: --flavor {run.trace.flavor} is for a .json or .json.gz trace, not a "
                             "folder")
        if run.trace.delta_time:
            raise InputError(f"{target.name}: --delta-time is for a .pftrace or .pftrace.gz trace, not a folder")


def site_options(run: Run, rewrites_dir: str = "rewrites") -> SiteOptions:
    from .site import SiteOptions
    events = run.trace.window_events
    return SiteOptions(run.steps.max_nodes, run.steps.jobs, rewrites_dir, sys.maxsize if events is None else events)


def site_pages(run: Run) -> Pages:
    """What the site shows of a run with a profile (Site.reads)."""
    from .site import Pages
    return Pages(run.summary, run.step_graphs, run.timeline, run.listings, run.report, run.diff)


class Site(_Folder):
    """A profile (and its rewrites trace): the static site, with the run report, and the diff from --baseline."""

    reads = ("timeline", "summary", "step_graphs", "listings", "report", "diff")  # the timeline first: it decodes

    def accepts(self, run: Run) -> bool:
        return run.profile is not None

    def write(self, run: Run, target: Target, progress: Progress | None = None) -> str:
        from .site import build_site
        assert target.path is not None
        ex = run.executor
        with atomic_folder(target.path) as tmp, ex.stopping_on_error():  # its workers stop before the folder goes
            build_site(tmp, site_pages(run), site_options(run), progress, ex)
        return lines(f"wrote {target.path / 'index.html'} in {run.seconds():.2f} s\n")


class StepSvgs(_Folder):
    """A rewrites trace alone: every rewrite's steps as SVGs with manifest.json, and the site's pages of them."""

    reads, progress = ("step_graphs",), (("drawing step SVGs", PERCENT), SITE_PHASE)  # SVGs: rough work, no unit

    def accepts(self, run: Run) -> bool:
        return run.profile is None

    def write(self, run: Run, target: Target, progress: Progress | None = None) -> str:
        from .graphs import render_rewrites
        from .site import Pages, build_site
        assert target.path is not None and run.step_graphs is not None
        ex = run.executor
        with atomic_folder(target.path) as tmp, ex.stopping_on_error():  # its workers stop before the folder goes
            render_rewrites(run.step_graphs, tmp, run.steps, progress, ex)
            build_site(tmp, Pages(graphs=run.step_graphs), site_options(run, "."), progress, ex)
        return lines(f"wrote {target.path / 'index.html'} in {run.seconds():.2f} s\n")


# --- report and diff ----------------------------------------------------------------------------------------------
class Answer(Writer):
    """The run report (`vizexport report`) or the diff (`vizexport diff`) as a file: each format's writer renders
    the record it reads (`render`: the name of its renderer in vizexport.report)."""

    def __init__(self, command: str, suffix: str, render: str) -> None:
        self.command, self.suffixes, self.render = command, (suffix,), render
        self.reads = (command,)  # the Run's `report` or `diff`

    def write(self, run: Run, target: Target, progress: Progress | None = None) -> str:
        from . import report
        from .report.diff_sections import verdict_counts
        from .report.run_sections import headline
        assert target.path is not None
        x = getattr(run, self.command)
        render: Callable[[Any], str] = getattr(report, self.render)
        write_atomic(target.path, render(x).encode())
        return lines(f"wrote {target.name}: {headline(x) if self.command == 'report' else verdict_counts(x)}\n")


class ReportText(Writer):
    command, kind, reads = "report", STDOUT, ("report",)

    def write(self, run: Run, target: Target, progress: Progress | None = None) -> str:
        from .report import report_text
        return report_text(run.report)


class DiffText(Writer):
    command, kind, reads = "diff", STDOUT, ("diff",)

    def write(self, run: Run, target: Target, progress: Progress | None = None) -> str:
        from .report import diff_text
        return diff_text(run.diff)


# --- top, info, show: text on stdout ------------------------------------------------------------------------------
class Top(Writer):
    """The kernel table as text (the longest 20 and the rest by default), JSON or CSV (every kernel by default)."""

    command, kind, reads = "top", STDOUT, ("kernel_table",)

    def __init__(self, fmt: str) -> None:
        self.fmt = fmt

    def write(self, run: Run, target: Target, progress: Progress | None = None) -> str:
        table, device, rows, view = run.kernel_table, run.answers.device, run.view.rows, run.view
        if device and not table.device_ns and device not in table.devices:
            what, known = ("spans on host track", "tracks") if table.host else ("launches on device", "devices")
            raise InputError(f"{run.need_profile().path}: no {what} {device!r} ({known}: "
                             f"{', '.join(map(shown, table.devices)) or 'none'})")
        note = launches_note(run.need_profile(), table)
        if self.fmt == "json":
            return tables.as_json(table, rows, note) + "\n"
        if self.fmt == "csv":
            return tables.as_csv(table, rows)
        text = tables.as_text(table, TOP_TEXT_ROWS if rows is None else rows, view.color, view.wide)
        notes = tables.prose(f"note: {note}", view.wide) if note else []
        return "\n".join([text, *notes]) + "\n"


class Info(Writer):
    """What each input holds, as text (a block per file) or a JSON list."""

    command, kind, reads = "info", STDOUT, ("summaries",)

    def __init__(self, fmt: str) -> None:
        self.fmt = fmt

    def write(self, run: Run, target: Target, progress: Progress | None = None) -> str:
        from .info import as_json, as_text
        return (as_json(run.summaries) if self.fmt == "json" else "\n".join(map(as_text, run.summaries))) + "\n"


class Show(Writer):
    """A rewrite context's rewrites or, with StepOptions.rewrite, that rewrite replayed, as text or JSON."""

    command, kind, reads = "show", STDOUT, ("loaded",)

    def __init__(self, fmt: str) -> None:
        self.fmt = fmt

    def write(self, run: Run, target: Target, progress: Progress | None = None) -> str:
        from .graphs import show
        from .graphs.show import context_view, rewrite_view
        log = run.loaded[0]
        if not isinstance(log, RewriteLog):
            raise InputError(f"{run.inputs[0]}: a profile, not a rewrites trace (show needs rewrites.pkl)")
        if run.steps.ctx is None:  # no context named: the list to pick one from (nothing replayed)
            listed = show.contexts_view(log.contexts)
            if self.fmt == "json":
                return json_text(json.dumps(listed, indent=1, ensure_ascii=False)) + "\n"
            return show.contexts_text(listed, run.view.color) + "\n"
        graphs, ctx, rewrite = run.step_graphs, run.steps.ctx, run.steps.rewrite
        assert graphs is not None
        with gc_paused():
            view = context_view(graphs, ctx) if rewrite is None else rewrite_view(graphs, ctx, rewrite)
        if self.fmt == "json":
            return json_text(json.dumps(view, indent=1, ensure_ascii=False)) + "\n"
        return (show.context_text if rewrite is None else show.rewrite_text)(view, run.view.color) + "\n"


# --- demo ---------------------------------------------------------------------------------------------------------
class Demo(Writer):
    """Everything on the bundled sample in one folder: the site, the trace as Chrome JSON, and info.json."""

    command, kind, progress = "demo", FOLDER, (SITE_PHASE,)
    reads = ("timeline", "summaries", "step_graphs", "listings", "report")

    def write(self, run: Run, target: Target, progress: Progress | None = None) -> str:
        from .info import as_json, as_text
        from .site import TRACE as SITE_TRACE
        from .site import build_site
        out = target.path
        assert out is not None
        info = "\n".join(map(as_text, run.summaries)) + "\n"
        with atomic_folder(out) as tmp, run.executor.stopping_on_error():  # its workers stop before the folder goes
            build_site(tmp, site_pages(run), site_options(run), progress, run.executor)
            write_trace(run.timeline, tmp / DEMO_TRACE, executor=run.executor)
            write_atomic(tmp / "info.json", as_json(run.summaries).encode())
        index = out / "index.html"
        return info + lines(f"wrote {index}, {DEMO_TRACE} and info.json in {run.seconds():.2f} s\n"
                            f"open {index} in a browser, or run: vizexport open {out / SITE_TRACE}\n")


WRITERS: tuple[Writer, ...] = (
    *(Trace(w) for w in TRACE_WRITERS), Site(), StepSvgs(),
    *(Answer(c, suffix, render) for c in ("report", "diff")
      for suffix, render in ((".html", "answer_html"), (".json", "answer_json"), (".md", "answer_markdown"))),
    ReportText(), DiffText(), Top(TEXT), Top("json"), Top("csv"), Info(TEXT), Info("json"), Show(TEXT), Show("json"),
    Demo(),
)
_UNKNOWN = {"convert": "name a trace {formats}, or a folder {name}/", "report": "name a {formats} file",
            "diff": "name a {formats} file"}  # what a command's output may be named


def suffixes(command: str) -> list[str]:
    """The file names a command's outputs may end with, in the registry's order."""
    return [s for w in WRITERS if w.command == command and w.kind == FILE for s in w.suffixes]


def classify(command: str, output: str | Path | None, fmt: str = TEXT) -> Target:
    """What `-o` names, decided once: stdout (no output named), a folder (for a command that writes folders: a
    trailing slash, an existing folder, or a new name without a suffix; any name if it writes nothing else) or a file
    whose name ends with a suffix the command's writers write. Refused: a name of no known format, and anything but a
    regular file to replace."""
    if output is None:
        return Target(STDOUT, fmt=fmt)
    name, path = str(output), Path(output)
    folders = any(w.command == command and w.kind == FOLDER for w in WRITERS)
    if folders and (name.endswith(("/", os.sep)) or path.is_dir() or not suffixes(command)):
        return Target(FOLDER, path, name=name)
    known = sorted(suffixes(command), key=len, reverse=True)  # .json.gz before .json
    suffix = next((s for s in known if path.name.lower().endswith(s)), None)
    if suffix is None:
        if folders and not (path.suffix or path.exists()):
            return Target(FOLDER, path, name=name)
        formats = ", ".join("*" + s for s in suffixes(command))
        raise InputError(f"{name}: unknown output format ({_UNKNOWN[command].format(formats=formats, name=name)})")
    if path.exists() and not path.is_file():
        raise InputError(f"{name}: {NOT_A_FILE}")
    return Target(FILE, path, suffix, name=name)


def candidates(command: str, target: Target) -> list[Writer]:
    """The writers of a command that take the target."""
    found = [w for w in WRITERS if w.command == command and w.takes(target)]
    if not found:
        raise ValueError(f"no writer of {command} takes a {target.kind} {target.name or target.fmt}")
    return found


def writer_for(command: str, target: Target, run: Run) -> Writer:
    """The one writer of the target; where several take it, the first that accepts the run's inputs."""
    found = candidates(command, target)
    return found[0] if len(found) == 1 else next(w for w in found if w.accepts(run))


