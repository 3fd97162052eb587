"""The `vizexport` command. It wires readers to writers; nothing else does.

A command loads only its own modules: the parser defines the command given (the others' options name constants of
modules it need not load) and each command imports its heavy parts when it runs, so that `vizexport top` costs
little more than reading its profile."""
from __future__ import annotations

import argparse
import math
import os
import re
import signal
import sys
import tempfile
import threading
import warnings
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, NoReturn

from ._version import __version__
from .analysis import tables
from .analysis.top import BY_PROGRAM, GROUPINGS
from .errors import InputError
from .forks import Executor, ForkExecutor
from .gcpause import gc_paused, keep_all, release
from .graphs import StepOptions
from .latest import latest_inputs
from .limits import GIB, MEMORY_BASE, MEMORY_PER_INPUT_BYTE, limit_memory, limit_output, memory_budget
from .output import check_folder, clean_stale
from .perfetto import FORMATS
from .pickles import brief, is_pickle
from .progress import STAGES, progress_bars, started, status
from .run import AnswerOptions, LoadOptions, Run, TraceOptions, ViewOptions
from .text import MESSAGE_CHARS, lines, shown
from .tinygrad.releases import RELEASES
from .units import bytes_text
from .writers import FILE, FOLDER, TEXT, Site, StepSvgs, Target, Writer, candidates, classify, writer_for

COMMANDS = ("convert", "info", "top", "show", "report", "diff", "demo", "open", "history")
EXIT_USAGE = 2  # argparse's code for a usage error
LATEST = "none: tinygrad's latest pickles, where it writes them"
USAGE = """vizexport PROFILE.pkl [REWRITES.pkl] -o OUT.pftrace|OUT.pftrace.gz|OUT.json|OUT.json.gz [--flavor kineto]
       vizexport [PROFILE.pkl] [REWRITES.pkl] -o OUTDIR/ [--baseline BASE.pkl]  (static site; rewrites alone: SVGs)
       vizexport info [FILE...] [--json]
       vizexport top [PROFILE.pkl [REWRITES.pkl]] [--json|--csv] [--by name] [--host] [--wide] [--between A B] [-n N]
       vizexport show [REWRITES.pkl] [-s CONTEXT [-i REWRITE]] [--json]
       vizexport report [PROFILE.pkl [REWRITES.pkl]] [-o REPORT.html|.json|.md]
       vizexport diff BASE.pkl PR.pkl [-o DIFF.html|.json|.md] [--fail-if-slower PCT]
       vizexport open [TRACE|PROFILE.pkl] [--at TIME | --window N] [--trace-processor PATH] [--no-browser]
       vizexport history add|check|site|list STORE …  (a store of runs: vizexport history -h)
       vizexport demo -o OUTDIR
A command named no pickle reads tinygrad's latest, where tinygrad writes them (its temp folder: profile.pkl.USER,
rewrites.pkl.USER), and says which it took."""


def _release(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tinygrad-version", choices=RELEASES, metavar="VERSION",
                   help=f"read the pickles as written by this tinygrad release ({', '.join(RELEASES)}); "
                        "default: detected from the content")


def _common(p: argparse.ArgumentParser) -> None:
    _release(p)
    p.add_argument("--debug", action="store_true", help="show a traceback on errors")
    p.add_argument("--memory-limit", type=float, metavar="GIB", help="cap on data memory in GiB, for the command and "
                   f"its worker processes together (default: {MEMORY_BASE // GIB} GiB + {MEMORY_PER_INPUT_BYTE} × the "
                   "inputs' size; input beyond it ends with an error, not with the machine's memory)")
    p.add_argument("--output-limit", type=float, metavar="GIB", help="cap on the bytes written, in GiB (default: "
                   "64 MiB or 64 × the inputs' size, whichever is more; 512 × for SVG steps; output beyond it ends "
                   "with an error, not with the machine's disk)")


class Parser(argparse.ArgumentParser):
    """A usage error is one line naming the command, and where its help is (argparse prints the whole usage)."""

    commands: dict[str, argparse.ArgumentParser]

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:  # type: ignore[override]
        """As argparse does, but an argument no command takes is refused by that command's parser."""
        parsed, extra = self.parse_known_args(args, namespace)
        if extra:
            commands = getattr(self, "commands", {})
            parser = commands.get(getattr(parsed, "command", None), self)
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        return parsed

    def error(self, message: str) -> NoReturn:
        missing = message.removeprefix("the following arguments are required: ")
        said = f"missing {missing}" if missing != message else message
        self.exit(EXIT_USAGE, f"{self.prog}: {shown(said, MESSAGE_CHARS)} (see {self.prog} --help)\n")


def parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line: every command (None), or the `command` alone (main knows it from the first argument; the
    others' options name constants of modules it need not load: Graphviz's, the site's, the history's)."""
    p = Parser(prog="vizexport", usage=USAGE, description="Turn tinygrad VIZ/PROFILE pickles into "
                                "files anyone can open (convert is the default command).")
    p.add_argument("--version", action="version", version=f"vizexport {__version__}")
    sub = p.add_subparsers(dest="command", required=True, prog="vizexport", parser_class=Parser)
    p.commands = sub.choices  # each command's parser: its own usage errors
    for name, add in SUBPARSERS.items():  # in the order --help lists them
        if command is None or name == command:
            add(sub)
    return p


def usage_error(command: str, message: str) -> NoReturn:
    """A usage error of `command` (one line, exit 2), as its parser words them."""
    parser(command).commands[command].error(message)


def _info_parser(sub: argparse._SubParsersAction) -> None:
    info = sub.add_parser("info", help="what a profile.pkl / rewrites.pkl holds: release, events, span, memory peaks, "
                          "markers")
    info.add_argument("files", nargs="*", type=Path, metavar="FILE", help=f"profile or rewrites pickles; {LATEST}")
    info.add_argument("--json", action="store_true", help="print a JSON list instead of text")
    _common(info)


def _demo_parser(sub: argparse._SubParsersAction) -> None:
    demo = sub.add_parser("demo", help="run vizexport on its bundled sample (a tinygrad 0.14.0 NULL-device run)")
    demo.add_argument("-o", "--output", type=Path, required=True, metavar="OUTDIR")
    _common(demo)


def _history() -> Any:
    """vizexport.history.command: `vizexport history` (#35), its parser and commands."""
    from .history import command
    return command


def _history_parser(sub: argparse._SubParsersAction) -> None:
    _history().add_parser(sub, _common)


def _convert_parser(sub: argparse._SubParsersAction) -> None:
    from .graphs.options import POLICIES
    from .perfetto import FLAVORS
    from .windows import WINDOW_EVENTS
    conv = sub.add_parser("convert", help="profile (+ rewrites) → Perfetto trace or Chrome JSON (the default)")
    conv.add_argument("inputs", nargs="*", type=Path, metavar="PICKLE", help="a profile.pkl, optionally with its "
                      f"rewrites.pkl (kind detected from content); {LATEST}")
    conv.add_argument("-o", "--output", required=True, metavar="OUT",
                      help=f"output file, its name picks the format: {', '.join(FORMATS)}; or a folder OUT/")
    conv.add_argument("--no-compress", action="store_true", help="no compressed_packets in .pftrace output")
    conv.add_argument("--window-events", type=int, default=WINDOW_EVENTS, metavar="N",
                      help=f"a trace of more events is written as an overview at OUT and windows of about N events "
                           f"in OUT's folder NAME.windows/ (default {WINDOW_EVENTS:,}: a window opens in the Perfetto "
                           "UI in about 1 GB of browser memory)")
    conv.add_argument("--no-split", action="store_true", help="always write one trace, however big")
    conv.add_argument("--delta-time", action="store_true", help="a .pftrace's timestamps as deltas: a smaller file "
                      "(a long run's down to a third), but the Perfetto UI then shows a System > Clock Snapshots track")
    conv.add_argument("--flavor", choices=FLAVORS, help="a dialect of the output format: kineto = Chrome JSON as "
                      "the PyTorch profiler writes it (.json, .json.gz), for Holistic Trace Analysis and alike; "
                      "always one file")
    rw = conv.add_argument_group("rewrite SVGs (folder output of a rewrites.pkl alone; the site lays out every step "
                                 "in the browser)")
    rw.add_argument("--ctx", metavar="REGEX", help="only rewrite contexts whose name matches")
    rw.add_argument("--rewrite", metavar="REGEX", help="only rewrites whose name matches")
    rw.add_argument("--steps", choices=POLICIES, help="which steps get an SVG: default (first "
                    "and last state, and every step of rewrites with at most ~50 matches), ends (first and last "
                    "state), all")
    rw.add_argument("--all-steps", action="store_true", help="render every match step (same as --steps all)")
    rw.add_argument("--max-nodes", type=int, metavar="N", help="larger graphs show the neighbourhood of the change "
                    f"(default {StepOptions.max_nodes}; the site's step viewer too)")
    rw.add_argument("--jobs", type=int, default=None, metavar="N", help="parallel processes (default: cores; "
                    "fewer where they would not fit in the memory cap, which they share)")
    site = conv.add_argument_group("site (folder output of a profile)")
    site.add_argument("--baseline", type=Path, metavar="BASE.pkl", help="a base run's profile: adds diff.html, what "
                      "changed from it to this run")
    site.add_argument("--baseline-rewrites", type=Path, metavar="REWRITES.pkl", help="the base run's rewrites trace")
    _peaks(site)
    _common(conv)


def _open_parser(sub: argparse._SubParsersAction) -> None:
    from .site.serve import FETCH_TIMEOUT, PORT
    op = sub.add_parser("open", help="open a trace in ui.perfetto.dev (served once, to the UI only, from "
                        "127.0.0.1:9001); a trace written as windows opens its overview, or a window")
    op.add_argument("trace", nargs="?", type=Path, metavar="TRACE", help="a trace vizexport wrote, or a profile.pkl "
                    "(converted to a temporary trace, removed after); none: tinygrad's latest profile, where it "
                    "writes it")
    at = op.add_mutually_exclusive_group()
    at.add_argument("--at", metavar="TIME", help="open the window holding this time from the run's start "
                    "(12.5s, 800ms, 3m)")
    at.add_argument("--window", type=int, metavar="N", help="open window N (index.json lists them)")
    op.add_argument("--trace-processor", type=Path, metavar="PATH", help="a native trace_processor (or "
                    "trace_processor_shell) binary: it loads the trace and the UI uses it (RPC on 127.0.0.1:9001)")
    op.add_argument("--no-browser", action="store_true", help="only print the link (e.g. on a remote machine)")
    op.add_argument("--port", type=_port, default=PORT, help=f"{PORT} is the port the Perfetto UI allows (default)")
    op.add_argument("--timeout", type=_seconds, default=FETCH_TIMEOUT, metavar="SEC", help="give up when the UI has "
                    f"not fetched the trace within SEC seconds (default {FETCH_TIMEOUT:g})")
    _release(op)  # of a profile.pkl it converts
    op.add_argument("--debug", action="store_true", help=argparse.SUPPRESS)
    op.add_argument("--memory-limit", type=float, help=argparse.SUPPRESS)
    op.add_argument("--output-limit", type=float, help=argparse.SUPPRESS)


def _port(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"not a port (1 to 65535): {text}")
    return int(text)


def _seconds(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        x = math.nan
    if not 0 < x < math.inf:
        raise argparse.ArgumentTypeError(f"not a number of seconds above 0: {text}")
    return x


def _top_parser(sub: Any) -> None:
    top = sub.add_parser("top", help="per kernel program and device: launches, time statistics, share, GFLOPS, "
                         "GB/s, category", description="The kernels that took the time, longest total first, as "
                         "tinygrad's `viz.cli -t` sums them. Durations are those of the device's own slices (as "
                         "tinygrad's viewer draws them); GFLOPS and GB/s are achieved rates from the rewrites trace's "
                         "estimates, weighted by time. JIT graph batches are listed apart (their entries are "
                         "launches of their devices too).")
    top.add_argument("inputs", nargs="*", type=Path, metavar="PICKLE", help="a profile.pkl, optionally with its "
                     f"rewrites.pkl (estimates and UOps for the categories); {LATEST}")
    fmt = top.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print JSON (every kernel unless -n)")
    fmt.add_argument("--csv", action="store_true", help="print CSV (every kernel unless -n)")
    top.add_argument("--between", nargs=2, metavar=("MARKER_A", "MARKER_B"), help="only launches that START at or "
                     "after the first marker named MARKER_A and at or before the first named MARKER_B (as tinygrad's "
                     "viz.cli --interval); a launch may end after MARKER_B")
    top.add_argument("--device", metavar="D", help="only this device string (NULL:1, AMD:SDMA:0) or root device "
                     "(AMD: its queue and copy engines); with --host, a host track (TINY, USER, GC)")
    top.add_argument("--by", choices=GROUPINGS, default=BY_PROGRAM, help="a row per program (default: a name's "
                     "programs apart, labelled with their keys) or per name, as tinygrad's viz.cli -t")
    top.add_argument("--host", action="store_true", help="the host's spans (TINY: compiler, USER: Tensor calls, GC) "
                     "per name instead of device launches, as viz.cli -t lists them")
    top.add_argument("-n", type=int, metavar="N", help="the N longest kernels and one row for the rest (default: 20 "
                     "as text, all for --json/--csv; -1: all)")
    top.add_argument("--wide", action="store_true", help="text: median, p90, min and max too, and whole names, "
                     f"however wide (default: at most {tables.WIDTH} columns)")
    _common(top)


def _show_parser(sub: Any) -> None:
    sh = sub.add_parser("show", help="a rewrite context, or one rewrite match by match, as text",
                        description="A context's rewrites (depth, where they ran, matches) or, with -i, one rewrite "
                        "replayed: its input graph, each match's pattern location and diff, the graph it leaves.")
    sh.add_argument("rewrites", nargs="?", type=Path, metavar="REWRITES", help="a rewrites.pkl; none: tinygrad's "
                    "latest, where it writes it")
    sh.add_argument("-s", "--ctx", metavar="CONTEXT", help="the context: its index (as `vizexport show REWRITES` "
                    "lists them and the site numbers them) or a regular expression one name matches; without it, "
                    "the list of contexts")
    sh.add_argument("-i", "--rewrite", metavar="REWRITE", help="one rewrite of it: its index or a regular "
                    "expression one name matches")
    sh.add_argument("--json", action="store_true", help="print JSON")
    _common(sh)


def _peaks(p: argparse._ActionsContainer) -> None:
    p.add_argument("--peak-gflops", type=float, metavar="X", help="the devices' peak GFLOPS, for achieved vs peak")
    p.add_argument("--peak-gbs", type=float, metavar="X", help="the devices' peak memory bandwidth in GB/s")


def _report_parser(sub: argparse._SubParsersAction) -> None:
    rep = sub.add_parser("report", help="where the time went: busy/idle devices, gaps, categories, distributions, "
                         "launch latency, JIT batches, call sites, achieved vs peak")
    rep.add_argument("inputs", nargs="*", type=Path, metavar="PICKLE", help="a profile.pkl, optionally with its "
                     f"rewrites.pkl (estimates, categories); {LATEST}")
    rep.add_argument("-o", "--output", type=Path, metavar="OUT", help="REPORT.html (one file, SVG plots), .json or "
                     ".md; default: text on stdout")
    _peaks(rep)
    _common(rep)


def _diff_parser(sub: argparse._SubParsersAction) -> None:
    dif = sub.add_parser("diff", help="what changed from a base run to a pull request's run, with noise-aware "
                         "verdicts; exit code 3 with --fail-if-slower")
    dif.add_argument("base", type=Path, metavar="BASE.pkl", help="the base run's profile.pkl (any release)")
    dif.add_argument("pr", type=Path, metavar="PR.pkl", help="the other run's profile.pkl (any release)")
    dif.add_argument("--base-rewrites", type=Path, metavar="REWRITES.pkl", help="the base run's rewrites trace")
    dif.add_argument("--pr-rewrites", type=Path, metavar="REWRITES.pkl", help="the other run's rewrites trace")
    dif.add_argument("-o", "--output", type=Path, metavar="OUT", help="DIFF.html (one file, SVG plots), .json or .md "
                     "(a pull-request comment); default: text on stdout")
    _history().verdict_options(dif)  # as `history check`'s
    _common(dif)


SUBPARSERS: dict[str, Callable[[argparse._SubParsersAction], None]] = {
    "convert": _convert_parser, "info": _info_parser, "top": _top_parser, "show": _show_parser, "open": _open_parser,
    "report": _report_parser, "diff": _diff_parser, "history": _history_parser, "demo": _demo_parser}


def say(text: str, to_stderr: bool = False) -> None:
    """Print a line of ours that may quote names or paths: safe for a terminal or a CI log (text.lines)."""
    print(lines(text), file=sys.stderr if to_stderr else sys.stdout)


def reading(run: Run) -> str:
    """What the status line says while the inputs are read: their names and sizes."""
    paths = [Path(p) for r in (run, run.baseline) if r is not None for p in r.inputs if p is not None]
    size = sum(p.stat().st_size for p in paths if p.is_file())
    return f"reading {', '.join(p.name for p in paths)} ({bytes_text(size)})"


def emit(command: str, target: Target, run: Run, quiet: bool = False,
         check: Callable[[Writer], None] | None = None) -> Writer:
    """A command's one way out: the writers that take the target refuse the options they cannot honour, a folder
    output is checked (output.check_folder) and a file's stale temporaries removed, the inputs are read, the writer
    that takes them is picked (and `check`ed), what it reads is derived, and it writes; what it says is printed
    (unless `quiet`): each writer's text is safe to print as it is (text.lines on our lines, its own sanitised
    tables). On a terminal, a status line says what it is doing from the start, then bars count the writing."""
    found = candidates(command, target)
    for w in found:
        w.check(run, target)
    if target.kind == FOLDER:  # before the inputs are read: a folder we may not replace ends the run
        check_folder(target.path)
    elif target.kind == FILE:
        clean_stale(target.path)  # a killed run's temporary
    if any(w.warm for w in found):
        # the report's plots need matplotlib: its helper imports it while the inputs load
        from .site import warm_plots
        run.executor.prepare(warm_plots)
    kept = False
    try:
        with status(reading(run)) as line:
            with gc_paused():  # millions of acyclic objects: see gcpause
                writer = writer_for(command, target, run.read())
                if check is not None:
                    check(writer)
                for part in writer.reads:
                    line.say(STAGES.get(part, part))
                    run.derive((part,))
                kept = keep_all()  # they live until the command ends: the GC need not look at them again
            line.say(f"writing {target.name or 'the ' + target.fmt}")
            if writer.progress:
                line.stop()  # its bars take over
            with progress_bars(writer.progress) as progress:
                text = writer.write(run, target, progress)
    finally:
        release(kept)
        run.executor.discard_prepared()  # a rewrites trace alone has no report
    if not quiet:  # line by line: a reader that left (`… | head`) then ends in BrokenPipeError, never in a short write
        sys.stdout.writelines(text.splitlines(keepends=True))
    return writer


def convert(inputs: Sequence[Path], output: Path, version: str | None = None, quiet: bool = False, **trace: Any
            ) -> int:
    """PROFILE [REWRITES] → one trace file, or (above `window_events` events, no flavor) an overview and windows, as
    `vizexport PROFILE -o OUT` does; `trace`: TraceOptions' fields (compress, window_events: None by default,
    flavor, delta_time)."""
    target = classify("convert", str(output))
    if target.kind == FOLDER:
        raise InputError(f"{output}: names a folder, not a trace file ({', '.join('*' + f for f in FORMATS)})")
    with ForkExecutor() as ex:
        run = Run(tuple(inputs), load=LoadOptions(version), trace=TraceOptions(**{"window_events": None, **trace}),
                  executor=ex)
        emit("convert", target, run, quiet)
    return 0


# convert's options that shape some outputs only: the writers each is for (another output refuses it, exit 2)
ONLY_FOR: dict[str, tuple[type[Writer], ...]] = {
    **dict.fromkeys(("--ctx", "--rewrite", "--steps", "--all-steps"), (StepSvgs,)),
    **dict.fromkeys(("--max-nodes", "--jobs"), (StepSvgs, Site)),
    **dict.fromkeys(("--baseline", "--baseline-rewrites", "--peak-gflops", "--peak-gbs"), (Site,)),
}
_FOR: dict[type[Writer], str] = {StepSvgs: "the SVG export of a rewrites trace alone (-o OUTDIR/)",
                                 Site: "a site (-o OUTDIR/ with a profile)"}


def refuse_inapplicable(args: argparse.Namespace, writer: Writer) -> None:
    """A usage error (one line, exit 2) for an option given that does not shape what `writer` writes."""
    for option, writers in ONLY_FOR.items():
        given = getattr(args, option[2:].replace("-", "_"))
        if given is None or given is False or isinstance(writer, writers):  # not given (0 is: --jobs 0)
            continue
        what = f"{args.output}, a trace" if writer.kind == FILE else _FOR.get(type(writer), "this output")
        applies = " or ".join(_FOR[w] for w in writers)
        usage_error("convert", f"{option} shapes {applies}, not {what}")


def cmd_convert(args: argparse.Namespace, ex: Executor) -> int:
    if args.window_events < 1:
        raise InputError(f"--window-events must be positive, not {args.window_events}")
    target = classify("convert", args.output)
    if target.kind == FILE:  # a trace: refused before anything is read
        refuse_inapplicable(args, candidates("convert", target)[0])
    base = (args.baseline, args.baseline_rewrites)
    steps = {k: v for k, v in (("steps", "all" if args.all_steps else args.steps), ("max_nodes", args.max_nodes))
             if v is not None}
    load = LoadOptions(args.tinygrad_version)
    run = Run(tuple(args.inputs), load=load,
              trace=TraceOptions(not args.no_compress, None if args.no_split else args.window_events, args.flavor,
                                 args.delta_time),
              steps=StepOptions(args.ctx, args.rewrite, jobs=args.jobs, **steps),
              answers=AnswerOptions(args.peak_gflops, args.peak_gbs),
              baseline=Run(base, named=True, load=load, executor=ex) if any(base) else None, executor=ex)
    emit("convert", target, run, check=lambda w: refuse_inapplicable(args, w))
    return 0


def cmd_open(args: argparse.Namespace, ex: Executor) -> int:
    from .site.serve import check_port
    if not args.trace.is_file():
        raise InputError(f"{args.trace}: no such trace file")
    if not is_pickle(args.trace):
        return open_trace(args, args.trace)
    for given, option in ((args.at, "--at"), (args.window, "--window")):
        if given is not None:
            usage_error("open", f"{option} picks a window of a trace written as windows; a profile.pkl is opened "
                        "whole")
    check_port(args.port)  # before converting: a busy port ends the command at once
    with tempfile.TemporaryDirectory(prefix="vizexport-open-") as tmp:  # private (0700), removed on the way out
        trace = Path(tmp) / f"{args.trace.name.split('.')[0] or 'profile'}.pftrace"
        convert([args.trace], trace, args.tinygrad_version, quiet=True)
        try:
            return open_trace(args, trace)
        except InputError as e:  # named by the pickle given, not by the temporary trace (gone with its folder)
            raise InputError(str(e).replace(str(trace), str(args.trace))) from None


def open_trace(args: argparse.Namespace, path: Path) -> int:
    """Serve the trace at `path` (or the window of it --at or --window names) to the UI, or load it in a native
    trace processor."""
    from .site.serve import contained, run_trace_processor, serve
    trace = pick_window(path, args.at, args.window)
    if args.trace_processor is not None:
        contained(trace, path.parent)  # a window leading out of the folder is not loaded either
        return run_trace_processor(args.trace_processor, trace, browser=not args.no_browser)
    serve(trace, args.port, browser=not args.no_browser, timeout=args.timeout, within=path.parent)
    return 0


TIME_UNITS = {"ns": 1, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9, "m": 60e9, "min": 60e9, "h": 3600e9}
MAX_TIME = 1e18  # ns (31 years): a time past it is no time in a run (and past int64 ns)


def parse_time(text: str) -> int:
    """'12.5s', '800ms', '3m', '12.5' (seconds) → ns."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zµ]*)\s*", text)
    if m is None or m.group(2) not in ("", *TIME_UNITS):
        raise InputError(f"--at {text}: not a time (e.g. 12.5s, 800ms, 3m)")
    ns = float(m.group(1)) * TIME_UNITS[m.group(2) or "s"]
    if not ns <= MAX_TIME:
        raise InputError(f"--at {text}: past any run's end")
    return round(ns)


def pick_window(trace: Path, at: str | None, window: int | None) -> Path:
    """The trace to open: the one named, or one of its windows (by time from the run's start, or by number)."""
    from .perfetto.split import read_index, windows_folder
    if at is None and window is None:
        return trace
    index = read_index(trace)  # checked: plain file names, integer times
    if index is None:
        raise InputError(f"{trace}: was written whole, without windows (no {windows_folder(trace)}{os.sep}index.json)")
    wins = index["windows"]
    if not wins:
        raise InputError(f"{windows_folder(trace) / 'index.json'}: lists no windows")
    if window is None:
        ns = index["t0_ns"] + parse_time(at or "")
        window = next((w for w, x in enumerate(wins) if x["start_ns"] <= ns < x["end_ns"]), -1)
        if window < 0:
            span = (wins[-1]["end_ns"] - index["t0_ns"]) / 1e9
            raise InputError(f"--at {at}: outside the run (0 s to {span:.3f} s)")
    if not 0 <= window < len(wins):
        raise InputError(f"--window {window}: the trace has windows 0 to {len(wins) - 1}")
    return windows_folder(trace) / wins[window]["file"]


def cmd_info(args: argparse.Namespace, ex: Executor) -> int:
    run = Run(tuple(args.files), load=LoadOptions(args.tinygrad_version), executor=ex)
    emit("info", classify("info", None, "json" if args.json else TEXT), run)
    return 0


def use_color() -> bool:
    """ANSI colours on a terminal only (never in pipes, files or CI logs), unless NO_COLOR is set."""
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def cmd_top(args: argparse.Namespace, ex: Executor) -> int:
    run = Run(tuple(args.inputs), load=LoadOptions(args.tinygrad_version, host_spans=args.host),
              answers=AnswerOptions(between=tuple(args.between) if args.between else None, device=args.device,
                                    by=args.by, host=args.host),
              view=ViewOptions(args.n, use_color(), args.wide), executor=ex)
    emit("top", classify("top", None, "json" if args.json else "csv" if args.csv else TEXT), run)
    return 0


def cmd_show(args: argparse.Namespace, ex: Executor) -> int:
    if args.rewrite is not None and args.ctx is None:
        usage_error("show", "-i/--rewrite needs -s/--ctx (the context it is in)")
    run = Run((args.rewrites,), load=LoadOptions(args.tinygrad_version),
              steps=StepOptions(ctx=args.ctx, rewrite=args.rewrite), view=ViewOptions(color=use_color()), executor=ex)
    emit("show", classify("show", None, "json" if args.json else TEXT), run)
    return 0


def cmd_report(args: argparse.Namespace, ex: Executor) -> int:
    target = classify("report", args.output)
    run = Run(tuple(args.inputs), load=LoadOptions(args.tinygrad_version),
              answers=AnswerOptions(args.peak_gflops, args.peak_gbs), executor=ex)
    emit("report", target, run)
    return 0


def cmd_diff(args: argparse.Namespace, ex: Executor) -> int:
    from .history.command import EXIT_SLOWER
    target = classify("diff", args.output)
    load = LoadOptions(args.tinygrad_version)
    run = Run((args.pr, args.pr_rewrites), named=True, load=load,
              answers=AnswerOptions(alpha=args.alpha, min_effect=args.min_effect / 100),
              baseline=Run((args.base, args.base_rewrites), named=True, load=load, executor=ex), executor=ex)
    emit("diff", target, run)
    if args.fail_if_slower is not None:
        slow = run.diff.slowdowns(args.fail_if_slower) if run.diff is not None else []
        if slow:
            names = ", ".join(f"{shown(k.label)} on {shown(k.device)} ({(k.ratio - 1) * 100:+.1f}%)" for k in slow)
            say(f"vizexport: {len(slow)} kernel(s) significantly slower by more than {args.fail_if_slower:g}%: "
                f"{names}", to_stderr=True)
            return EXIT_SLOWER
    return 0


def sample_files() -> list[Path]:
    root = resources.files("vizexport.data.sample")
    return [Path(str(root.joinpath("profile.pkl"))), Path(str(root.joinpath("rewrites.pkl")))]


def cmd_demo(args: argparse.Namespace, ex: Executor) -> int:
    """Everything on the bundled sample, each input read and decoded once (one Run: the site, the trace and
    info.json read it)."""
    run = Run(tuple(sample_files()), load=LoadOptions(args.tinygrad_version), executor=ex)
    emit("demo", classify("demo", args.output), run)
    return 0


def _warning_line(message: Warning | str, category: type, *_: object, **__: object) -> str:
    """One line, whatever the warning quotes (a kernel's name, a glyph matplotlib has not)."""
    return lines(f"vizexport: warning: {shown(str(message), MESSAGE_CHARS)}") + "\n"


INPUTS = {"convert": "inputs", "info": "files", "top": "inputs", "report": "inputs", "show": "rewrites",
          "open": "trace", "history": "inputs"}  # where each command's pickles are (history: add and check)


def fill_latest(args: argparse.Namespace) -> None:
    """A command named no pickle reads tinygrad's latest (latest.py), and says which on stderr."""
    name = INPUTS.get(args.command)
    if name is None or not hasattr(args, name) or getattr(args, name):
        return
    paths, line = latest_inputs(args.command)
    say(line, to_stderr=True)
    setattr(args, name, paths if isinstance(getattr(args, name), list) else paths[0])


def inputs_of(args: argparse.Namespace) -> list[Path]:
    return {"convert": lambda: args.inputs + [p for p in (args.baseline, args.baseline_rewrites) if p],
            "info": lambda: args.files, "open": lambda: [p for p in (args.trace,) if p], "demo": sample_files,
            "top": lambda: args.inputs, "show": lambda: [p for p in (args.rewrites,) if p],
            "report": lambda: args.inputs,
            "diff": lambda: [p for p in (args.base, args.pr, args.base_rewrites, args.pr_rewrites) if p],
            "history": lambda: _history().inputs(args)}[args.command]()


def describe(e: BaseException, args: argparse.Namespace, limit: int | None) -> str:
    """One line for a failure: the file it concerns and what went wrong (main prints it as shown text: any name it
    quotes cannot break the line)."""
    names = ", ".join(map(str, inputs_of(args)))
    if isinstance(e, InputError):
        return str(e)
    if _dot_missing(e):
        return f"{getattr(args, 'output', names)}: {e}"
    if isinstance(e, MemoryError):
        size = f"{limit / GIB:.1f} GiB" if limit else "what the machine has"
        return f"{names}: needs more memory than its limit of {size} (--memory-limit GIB raises it)"
    if isinstance(e, OSError):
        where = e.filename or getattr(args, "output", None) or names
        return f"{where}: {e.strerror or e}"
    if isinstance(e, RecursionError):
        return f"{names}: nests too deeply to read"
    return f"{names}: {type(e).__name__}: {brief(str(e))} ({BUG})"


def _dot_missing(e: BaseException) -> bool:
    """Is it graphs.render.DotMissing? (only raised where that module is loaded: a failure loads nothing)"""
    render = sys.modules.get("vizexport.graphs.render")
    return render is not None and isinstance(e, render.DotMissing)


# What a failure no check foresaw ends in. The readers type every field they keep and word what a file can get
# wrong (InputError), so this is vizexport's fault, never the file's: tools/fuzz.py fails any case that prints it.
BUG = "an error vizexport did not anticipate: a bug, please report it; --debug shows where"


COMMAND = {"convert": cmd_convert, "info": cmd_info, "top": cmd_top, "show": cmd_show, "report": cmd_report,
           "diff": cmd_diff, "demo": cmd_demo, "open": cmd_open,
           "history": lambda args, ex: _history().run(args, ex)}
EXIT_INTERRUPTED, EXIT_TERMINATED, EXIT_PIPE = 130, 143, 141


RETRY_SECONDS = 0.25  # a stop signal's exception is raised again this often until it is on its way


class Terminated(KeyboardInterrupt):
    """SIGTERM (a CI job cancelled, `timeout`): the command ends as on Ctrl-C, with its own exit code."""


_stopping: type[KeyboardInterrupt] | None = None  # what a stop signal asked for


def _stop(signum: int, frame: Any) -> None:
    """SIGINT, SIGTERM: raise KeyboardInterrupt, Terminated. Python drops an exception raised where it cannot go on
    (an at-fork hook, which runs at every fork of a worker or of Graphviz; a __del__), so it is raised again every
    RETRY_SECONDS (SIGALRM) until one is on its way (main stops the retries); meanwhile clean-ups run undisturbed."""
    global _stopping
    if signum != signal.SIGALRM:
        _stopping = Terminated if signum == signal.SIGTERM else KeyboardInterrupt
        signal.setitimer(signal.ITIMER_REAL, RETRY_SECONDS, RETRY_SECONDS)
        warnings.simplefilter("ignore")  # what was cut short may warn (an import): only the last line is shown
    if _stopping is not None and not isinstance(sys.exc_info()[1], KeyboardInterrupt):
        raise _stopping


def _dropped(u: Any) -> None:
    """sys.unraisablehook: a stop signal's exception dropped where it could not go on is raised again (_stop), not
    printed; anything else is, as Python does."""
    if not isinstance(u.exc_value, KeyboardInterrupt):
        sys.__unraisablehook__(u)


STOP_SIGNALS = ("SIGINT", "SIGTERM", "SIGALRM")


def _on_stop(handlers: list | None) -> list | None:
    """Set the handlers of STOP_SIGNALS and sys.unraisablehook (None: _stop and _dropped), where this is the main
    thread and the OS has them; returns the ones they had."""
    global _stopping
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        return None
    signal.setitimer(signal.ITIMER_REAL, 0)
    _stopping = None
    handlers = handlers or [*[_stop] * len(STOP_SIGNALS), _dropped]
    old = [signal.signal(getattr(signal, name), h) for name, h in zip(STOP_SIGNALS, handlers, strict=False)]
    old.append(sys.unraisablehook)
    sys.unraisablehook = handlers[-1]
    return old


def set_limits(args: argparse.Namespace) -> int | None:
    """The command's budget (limits): its memory cap, and the bound on what it writes. Returns the memory cap."""
    inputs = inputs_of(args)
    gib = args.memory_limit
    limit = limit_memory(memory_budget(inputs) if gib is None else int(gib * GIB))
    out = args.output_limit
    if getattr(args, "output", None) is not None:  # the commands that write files
        limit_output(inputs, None if out is None else int(out * GIB))
    return limit


def main(argv: Sequence[str] | None = None) -> int:
    """The command, with one error boundary: every failure after parsing is one line on stderr naming the file,
    exit 1 (2 for usage errors, from argparse), no output left behind (--debug shows the traceback). SIGTERM ends it
    as Ctrl-C does. No worker process outlives it."""
    started()  # the modules are loaded: the first status line (progress.starting) ends before anything is printed
    warnings.formatwarning = _warning_line  # e.g. a corrupt SQTT blob: one line, decoding goes on
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] not in COMMANDS and argv[0] not in ("-h", "--help", "--version"):
        argv.insert(0, "convert")
    args = parser(argv[0] if argv and argv[0] in COMMANDS else None).parse_args(argv)
    handlers = _on_stop(None)
    ex = ForkExecutor()  # the command's one executor: every part of it that forks, forks through this
    try:
        with warnings.catch_warnings():  # a stop signal silences them (_stop)
            return _command(args, ex)
    finally:
        ex.stop_all()
        if handlers is not None:
            _on_stop(handlers)
        limit_output(None)


def _command(args: argparse.Namespace, ex: Executor) -> int:
    """Run the command within its budget; every failure as one line and an exit code."""
    limit = None
    try:
        fill_latest(args)
        limit = set_limits(args)
        return COMMAND[args.command](args, ex)
    except KeyboardInterrupt as e:
        if hasattr(signal, "setitimer"):
            signal.setitimer(signal.ITIMER_REAL, 0)  # it has arrived: no more retries (_stop)
        ex.stop_all()  # before the line: nothing comes after it
        end = "terminated" if isinstance(e, Terminated) else "interrupted"
        print(f"vizexport: {end} (no output written)", file=sys.stderr)
        return EXIT_TERMINATED if isinstance(e, Terminated) else EXIT_INTERRUPTED
    except BrokenPipeError:  # e.g. `vizexport info … | head`: the reader has all it wants
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the exit's flush must not fail again
        return EXIT_PIPE
    except Exception as e:
        if args.debug:
            raise
        ex.stop_all()
        say(f"vizexport: error: {shown(describe(e, args, limit), MESSAGE_CHARS)}", to_stderr=True)
        return 1


def run() -> NoReturn:
    """The console command: main(), then the process ends at once. A run holds millions of objects, and freeing them
    one by one at interpreter exit takes a tenth of a second for nothing: every output is complete and closed."""
    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:  # the reader left: as main's own handling of it
        code = code or 141
    os._exit(code)


if __name__ == "__main__":
    run()
