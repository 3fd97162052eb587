"""The `vizexport` command. It wires readers to writers; nothing else does."""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any, NoReturn

from tqdm import tqdm

from . import api
from ._version import __version__
from .analysis import tables
from .analysis.stats import ALPHA, MIN_EFFECT
from .errors import InputError
from .forks import discard_prepared, prepare
from .gcpause import gc_paused
from .graphs import DotMissing, show
from .graphs.export import POLICIES
from .history import command as history  # `vizexport history` (#35): its parser and commands live there
from .info import as_json, as_text
from .limits import GIB, limit_memory, memory_budget
from .output import Progress, atomic_folder, write_atomic
from .perfetto import FLAVORS, FORMATS, writer_for
from .perfetto.split import read_index, windows_folder
from .pickles import brief
from .records import Profile, RewriteLog
from .report import check_output, diff_text, report_text, write_diff, write_report
from .report.diff_sections import verdict_counts
from .report.run_sections import headline
from .site import warm_plots
from .site.serve import run_trace_processor, serve
from .tinygrad.releases import RELEASES
from .windows import WINDOW_EVENTS

COMMANDS = ("convert", "info", "top", "show", "report", "diff", "demo", "open", "history")
EXIT_SLOWER = 3  # `diff --fail-if-slower`: a kernel got significantly slower by more than allowed
USAGE = """vizexport PROFILE.pkl [REWRITES.pkl] -o OUT.pftrace|OUT.pftrace.gz|OUT.json|OUT.json.gz [--flavor kineto]
       vizexport [PROFILE.pkl] [REWRITES.pkl] -o OUTDIR/ [--baseline BASE.pkl]  (static site; rewrites alone: SVGs)
       vizexport info FILE... [--json]
       vizexport top PROFILE.pkl [REWRITES.pkl] [--json|--csv] [--between MARKER_A MARKER_B] [--device D] [-n N]
       vizexport show REWRITES.pkl -s CONTEXT [-i REWRITE] [--json]
       vizexport report PROFILE.pkl [REWRITES.pkl] [-o REPORT.html|.json|.md]
       vizexport diff BASE.pkl PR.pkl [-o DIFF.html|.json|.md] [--fail-if-slower PCT]
       vizexport open TRACE [--at TIME | --window N] [--trace-processor PATH] [--no-browser]
       vizexport history add|check|site|list STORE …  (a store of runs: vizexport history -h)
       vizexport demo -o OUTDIR"""


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tinygrad-version", choices=RELEASES, metavar="VERSION",
                   help=f"read the pickles as written by this tinygrad release ({', '.join(RELEASES)}); "
                        "default: detected from the content")
    p.add_argument("--debug", action="store_true", help="show a traceback on errors")
    p.add_argument("--memory-limit", type=float, metavar="GIB", help="cap on data memory in GiB (default: 1 GiB + "
                   "16 × the inputs' size; input beyond it ends with an error, not with the machine's memory)")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vizexport", usage=USAGE, description="Turn tinygrad VIZ/PROFILE pickles into "
                                "files anyone can open (convert is the default command).")
    p.add_argument("--version", action="version", version=f"vizexport {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    conv = sub.add_parser("convert", help="profile (+ rewrites) → Perfetto trace or Chrome JSON (the default)")
    conv.add_argument("inputs", nargs="+", type=Path, metavar="PICKLE",
                      help="a profile.pkl, optionally with its rewrites.pkl (kind detected from content)")
    conv.add_argument("-o", "--output", required=True, metavar="OUT",
                      help=f"output file, its name picks the format: {', '.join(FORMATS)}; or a folder OUT/")
    conv.add_argument("--no-compress", action="store_true", help="no compressed_packets in .pftrace output")
    conv.add_argument("--window-events", type=int, default=WINDOW_EVENTS, metavar="N",
                      help=f"a trace of more events is written as an overview at OUT and windows of about N events "
                           f"in OUT's folder NAME.windows/ (default {WINDOW_EVENTS:,}: a window opens in the Perfetto "
                           "UI in about 1 GB of browser memory)")
    conv.add_argument("--no-split", action="store_true", help="always write one trace, however big")
    conv.add_argument("--flavor", choices=FLAVORS, help="a dialect of the output format: kineto = Chrome JSON as "
                      "the PyTorch profiler writes it (.json, .json.gz), for Holistic Trace Analysis and alike; "
                      "always one file")
    rw = conv.add_argument_group("rewrite SVGs (folder output of a rewrites.pkl alone; the site lays out every step "
                                 "in the browser)")
    rw.add_argument("--ctx", metavar="REGEX", help="only rewrite contexts whose name matches")
    rw.add_argument("--rewrite", metavar="REGEX", help="only rewrites whose name matches")
    rw.add_argument("--steps", choices=POLICIES, default="default", help="which steps get an SVG: default (first "
                    "and last state, and every step of rewrites with at most ~50 matches), ends (first and last "
                    "state), all")
    rw.add_argument("--all-steps", action="store_true", help="render every match step (same as --steps all)")
    rw.add_argument("--max-nodes", type=int, default=400, metavar="N", help="larger graphs show the neighbourhood "
                    "of the change (default 400; the site's step viewer too)")
    rw.add_argument("--jobs", type=int, default=None, metavar="N", help="parallel processes (default: cores)")
    site = conv.add_argument_group("site (folder output of a profile)")
    site.add_argument("--baseline", type=Path, metavar="BASE.pkl", help="a base run's profile: adds diff.html, what "
                      "changed from it to this run")
    site.add_argument("--baseline-rewrites", type=Path, metavar="REWRITES.pkl", help="the base run's rewrites trace")
    _peaks(site)
    _common(conv)
    info = sub.add_parser("info", help="what a profile.pkl / rewrites.pkl holds: release, events, span, memory peaks")
    info.add_argument("files", nargs="+", type=Path, metavar="FILE")
    info.add_argument("--json", action="store_true", help="print a JSON list instead of text")
    _common(info)
    _top_parser(sub)
    _show_parser(sub)
    op = sub.add_parser("open", help="open a trace in ui.perfetto.dev (served once from 127.0.0.1:9001); a trace "
                        "written as windows opens its overview, or a window")
    op.add_argument("trace", type=Path, metavar="TRACE")
    at = op.add_mutually_exclusive_group()
    at.add_argument("--at", metavar="TIME", help="open the window holding this time from the run's start "
                    "(12.5s, 800ms, 3m)")
    at.add_argument("--window", type=int, metavar="N", help="open window N (index.json lists them)")
    op.add_argument("--trace-processor", type=Path, metavar="PATH", help="a native trace_processor (or "
                    "trace_processor_shell) binary: it loads the trace and the UI uses it (RPC on 127.0.0.1:9001)")
    op.add_argument("--no-browser", action="store_true", help="only print the link (e.g. on a remote machine)")
    op.add_argument("--port", type=int, default=9001, help="9001 is the port the Perfetto UI allows (default)")
    op.add_argument("--debug", action="store_true", help=argparse.SUPPRESS)
    op.add_argument("--memory-limit", type=float, help=argparse.SUPPRESS)
    _answers(sub)
    history.add_parser(sub, _common)
    demo = sub.add_parser("demo", help="run vizexport on its bundled sample (a tinygrad 0.14.0 NULL-device run)")
    demo.add_argument("-o", "--output", type=Path, required=True, metavar="OUTDIR")
    _common(demo)
    return p


def _top_parser(sub: Any) -> None:
    top = sub.add_parser("top", help="per kernel program and device: launches, time statistics, share, GFLOPS, "
                         "GB/s, category", description="The kernels that took the time, longest total first. "
                         "Durations are those of the device's own slices (as tinygrad's viewer draws them); GFLOPS "
                         "and GB/s are achieved rates from the rewrites trace's estimates, weighted by time.")
    top.add_argument("inputs", nargs="+", type=Path, metavar="PICKLE", help="a profile.pkl, optionally with its "
                     "rewrites.pkl (estimates and UOps for the categories)")
    fmt = top.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print JSON (every kernel unless -n)")
    fmt.add_argument("--csv", action="store_true", help="print CSV (every kernel unless -n)")
    top.add_argument("--between", nargs=2, metavar=("MARKER_A", "MARKER_B"), help="only launches that START at or "
                     "after the first marker named MARKER_A and at or before the first named MARKER_B (as tinygrad's "
                     "viz.cli --interval); a launch may end after MARKER_B")
    top.add_argument("--device", metavar="D", help="only this device string (NULL:1, AMD:SDMA:0) or root device "
                     "(AMD: its queue and copy engines)")
    top.add_argument("-n", type=int, metavar="N", help="the N longest kernels and one row for the rest (default: 20 "
                     "as text, all for --json/--csv; -1: all)")
    _common(top)


def _show_parser(sub: Any) -> None:
    sh = sub.add_parser("show", help="a rewrite context, or one rewrite match by match, as text",
                        description="A context's rewrites (depth, where they ran, matches) or, with -i, one rewrite "
                        "replayed: its input graph, each match's pattern location and diff, the graph it leaves.")
    sh.add_argument("rewrites", type=Path, metavar="REWRITES", help="a rewrites.pkl")
    sh.add_argument("-s", "--ctx", required=True, metavar="CONTEXT", help="the context: its index (as `vizexport "
                    "show` and the site number them) or a regular expression one name matches")
    sh.add_argument("-i", "--rewrite", metavar="REWRITE", help="one rewrite of it: its index or a regular "
                    "expression one name matches")
    sh.add_argument("--json", action="store_true", help="print JSON")
    _common(sh)


def _peaks(p: argparse._ActionsContainer) -> None:
    p.add_argument("--peak-gflops", type=float, metavar="X", help="the devices' peak GFLOPS, for achieved vs peak")
    p.add_argument("--peak-gbs", type=float, metavar="X", help="the devices' peak memory bandwidth in GB/s")


def _answers(sub: argparse._SubParsersAction) -> None:
    rep = sub.add_parser("report", help="where the time went: busy/idle devices, gaps, categories, distributions, "
                         "launch latency, JIT batches, call sites, achieved vs peak")
    rep.add_argument("inputs", nargs="+", type=Path, metavar="PICKLE", help="a profile.pkl, optionally with its "
                     "rewrites.pkl (estimates, categories)")
    rep.add_argument("-o", "--output", type=Path, metavar="OUT", help="REPORT.html (one file, SVG plots), .json or "
                     ".md; default: text on stdout")
    _peaks(rep)
    _common(rep)
    dif = sub.add_parser("diff", help="what changed from a base run to a pull request's run, with noise-aware "
                         "verdicts; exit code 3 with --fail-if-slower")
    dif.add_argument("base", type=Path, metavar="BASE.pkl", help="the base run's profile.pkl (any release)")
    dif.add_argument("pr", type=Path, metavar="PR.pkl", help="the other run's profile.pkl (any release)")
    dif.add_argument("--base-rewrites", type=Path, metavar="REWRITES.pkl", help="the base run's rewrites trace")
    dif.add_argument("--pr-rewrites", type=Path, metavar="REWRITES.pkl", help="the other run's rewrites trace")
    dif.add_argument("-o", "--output", type=Path, metavar="OUT", help="DIFF.html (one file, SVG plots), .json or .md "
                     "(a pull-request comment); default: text on stdout")
    dif.add_argument("--fail-if-slower", type=float, metavar="PCT", help=f"exit with code {EXIT_SLOWER} when a kernel "
                     "is significantly slower and its median launch time grew by more than PCT percent")
    dif.add_argument("--alpha", type=float, default=ALPHA, help=f"significance level of the test (default {ALPHA})")
    dif.add_argument("--min-effect", type=float, default=MIN_EFFECT * 100, metavar="PCT", help="a smaller change of "
                     f"the median is never significant (default {MIN_EFFECT * 100:g})")
    _common(dif)


def load_inputs(paths: Sequence[Path], version: str | None, need_profile: bool = True
                ) -> tuple[Profile | None, RewriteLog | None]:
    """At most one profile and at most one rewrites trace, told apart by content."""
    loaded = [api.load_any(p, version) for p in paths]
    profiles = [x for x in loaded if isinstance(x, Profile)]
    logs = [x for x in loaded if isinstance(x, RewriteLog)]
    if len(profiles) > 1 or len(logs) > 1 or (need_profile and not profiles):
        kinds = ", ".join(f"{p} ({'profile' if isinstance(x, Profile) else 'rewrites'})" for p, x in zip(paths, loaded,
                                                                                                        strict=True))
        raise InputError(f"need one profile.pkl and at most one rewrites.pkl, got: {kinds}")
    if profiles and not profiles[0].n_events:
        raise InputError(f"{profiles[0].path}: the profile holds no events (nothing to show)")
    return profiles[0] if profiles else None, logs[0] if logs else None


def is_folder(output: str) -> bool:
    """Whether `-o` names a folder (a trailing slash, an existing folder, or a new name without a suffix) rather
    than a trace file; a name that is neither is refused, and so is anything but a regular file to replace."""
    path = Path(output)
    if output.endswith(("/", os.sep)) or path.is_dir():
        return True
    if writer_for(path) is None:
        if path.suffix or path.exists():
            raise InputError(f"{output}: unknown output format (name a trace {', '.join('*' + f for f in FORMATS)}, "
                             f"or a folder {output}/)")
        return True
    if path.exists() and not path.is_file():
        raise InputError(f"{output}: is not a regular file (vizexport only replaces regular files)")
    return False


@contextmanager
def progress_bar(desc: str, unit: str, quiet: bool = False) -> Iterator[Progress | None]:
    """A tqdm bar on stderr while it is a terminal (nothing in CI logs or pipes): the Progress callback to pass."""
    if quiet or not sys.stderr.isatty():
        yield None
        return
    with tqdm(desc=desc, unit=unit, unit_scale=True, leave=False) as bar:
        def update(done: int, total: int) -> None:
            bar.total = total
            bar.update(done - bar.n)
        yield update


def convert(inputs: Sequence[Path], output: Path, version: str | None = None, compress: bool = True,
            quiet: bool = False, window_events: int | None = None, flavor: str | None = None) -> int:
    """PROFILE [REWRITES] → one trace file, or (above `window_events` events, no flavor) an overview and windows."""
    if is_folder(str(output)):
        raise InputError(f"{output}: names a folder, not a trace file ({', '.join('*' + f for f in FORMATS)})")
    found = writer_for(output)
    if flavor is not None and found is not None and flavor not in found[0].flavors:
        raise InputError(f"{output}: --flavor {flavor} writes Chrome JSON (name a .json or .json.gz output)")
    t0 = time.perf_counter()
    with gc_paused():  # millions of acyclic objects: see gcpause
        prof, log = load_inputs(inputs, version)
        tl = api.build_timeline(prof, log)
        n = tl.n_events()
        with progress_bar("writing", " events", quiet) as progress:
            if window_events is not None and n > window_events and flavor is None:
                split = api.write_windows(tl, output, window_events, compress=compress, progress=progress)
                size, what = split.bytes, (f"the overview, and {len(split.windows)} windows in "
                                           f"{split.folder}{os.sep} (index.json lists them)")
            else:
                size, what = api.write_trace(tl, output, compress=compress, progress=progress, flavor=flavor), ""
    if not quiet:
        print(f"wrote {output}{': ' + what if what else ''}: {n:,} events on {len(tl.tracks)} tracks, {size:,} bytes "
              f"({size / max(prof.n_events, 1):.1f} B/profile event) in {time.perf_counter() - t0:.2f} s")
    return 0


def export_folder(inputs: Sequence[Path], outdir: Path, version: str | None = None, baseline: Path | None = None,
                  baseline_rewrites: Path | None = None, **render_opts: Any) -> Path:
    """Profile and/or rewrites → a static site in `outdir` (trace, rewrite SVGs with manifest, index.html; with a
    profile the run report, with a baseline profile the diff from it)."""
    t0 = time.perf_counter()
    prepare(warm_plots)  # the report's plots need matplotlib: its helper imports it while the inputs load
    try:
        with gc_paused():
            prof, log = load_inputs(inputs, version, need_profile=False)
            if baseline is not None or baseline_rewrites is not None:
                if prof is None or baseline is None:
                    raise InputError(f"{baseline or baseline_rewrites}: --baseline needs this run's profile and the "
                                     "base run's profile")
                render_opts.update(baseline=load_one_profile(baseline, version),
                                   baseline_rewrites=load_rewrites_opt(baseline_rewrites, version))
        with progress_bar("drawing rewrite steps", "") as progress:
            index = api.build_site(outdir, prof, log, progress=progress, **render_opts)
    finally:
        discard_prepared()  # a rewrites trace alone has no report
    print(f"wrote {index} in {time.perf_counter() - t0:.2f} s")
    return index


def cmd_convert(args: argparse.Namespace) -> int:
    if args.window_events < 1:
        raise InputError(f"--window-events must be positive, not {args.window_events}")
    if is_folder(args.output):
        if args.flavor:
            raise InputError(f"{args.output}: --flavor {args.flavor} is for a .json or .json.gz trace, not a folder")
        opts = {"ctx": args.ctx, "rewrite": args.rewrite, "all_steps": args.all_steps, "max_nodes": args.max_nodes,
                "jobs": args.jobs, "steps": args.steps, "window_events": None if args.no_split else args.window_events,
                "baseline": args.baseline, "baseline_rewrites": args.baseline_rewrites, "peak_gflops": args.peak_gflops,
                "peak_gbs": args.peak_gbs}
        export_folder(args.inputs, Path(args.output), args.tinygrad_version, **opts)
        return 0
    if args.baseline or args.baseline_rewrites or args.peak_gflops or args.peak_gbs:
        raise InputError(f"{args.output}: --baseline and --peak-* make site pages: name a folder (-o OUTDIR/)")
    return convert(args.inputs, Path(args.output), args.tinygrad_version, not args.no_compress,
                   window_events=None if args.no_split else args.window_events, flavor=args.flavor)


def cmd_open(args: argparse.Namespace) -> int:
    if not args.trace.is_file():
        raise InputError(f"{args.trace}: no such trace file")
    trace = pick_window(args.trace, args.at, args.window)
    if args.trace_processor is not None:
        return run_trace_processor(args.trace_processor, trace, browser=not args.no_browser)
    serve(trace, args.port, browser=not args.no_browser)
    return 0


TIME_UNITS = {"ns": 1, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9, "m": 60e9, "min": 60e9, "h": 3600e9}


def parse_time(text: str) -> int:
    """'12.5s', '800ms', '3m', '12.5' (seconds) → ns."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zµ]*)\s*", text)
    if m is None or m.group(2) not in ("", *TIME_UNITS):
        raise InputError(f"--at {text}: not a time (e.g. 12.5s, 800ms, 3m)")
    return round(float(m.group(1)) * TIME_UNITS[m.group(2) or "s"])


def pick_window(trace: Path, at: str | None, window: int | None) -> Path:
    """The trace to open: the one named, or one of its windows (by time from the run's start, or by number)."""
    if at is None and window is None:
        return trace
    index = read_index(trace)
    if index is None:
        raise InputError(f"{trace}: was written whole, without windows (no {windows_folder(trace)}{os.sep}index.json)")
    wins = index["windows"]
    if window is None:
        ns = index["t0_ns"] + parse_time(at or "")
        window = next((w for w, x in enumerate(wins) if x["start_ns"] <= ns < x["end_ns"]), -1)
        if window < 0:
            span = (wins[-1]["end_ns"] - index["t0_ns"]) / 1e9
            raise InputError(f"--at {at}: outside the run (0 s to {span:.3f} s)")
    if not 0 <= window < len(wins):
        raise InputError(f"--window {window}: the trace has windows 0 to {len(wins) - 1}")
    return windows_folder(trace) / wins[window]["file"]


def cmd_info(args: argparse.Namespace) -> int:
    summaries = [api.summarize(api.load_any(f, args.tinygrad_version)) for f in args.files]
    print(as_json(summaries) if args.json else "\n".join(map(as_text, summaries)))
    return 0


def use_color() -> bool:
    """ANSI colours on a terminal only (never in pipes, files or CI logs), unless NO_COLOR is set."""
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def cmd_top(args: argparse.Namespace) -> int:
    with gc_paused():
        prof, log = load_inputs(args.inputs, args.tinygrad_version)
        table = api.kernel_table(prof, log, tuple(args.between) if args.between else None, args.device)
    if args.device and not table.device_ns and args.device not in table.devices:
        raise InputError(f"{prof.path}: no launches on device {args.device!r} (devices: "
                         f"{', '.join(table.devices) or 'none'})")
    if args.json or args.csv:
        print((tables.as_json if args.json else tables.as_csv)(table, args.n), end="" if args.csv else "\n")
    else:
        print(tables.as_text(table, 20 if args.n is None else args.n, use_color()))
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    with gc_paused():
        log = api.load_any(args.rewrites, args.tinygrad_version)
        if not isinstance(log, RewriteLog):
            raise InputError(f"{args.rewrites}: a profile, not a rewrites trace (show needs rewrites.pkl)")
        view = api.show_rewrites(log, args.ctx, args.rewrite)
    if args.json:
        print(json.dumps(view, indent=1, ensure_ascii=False))
    else:
        print((show.context_text if args.rewrite is None else show.rewrite_text)(view, use_color()))
    return 0


def load_one_profile(path: Path, version: str | None) -> Profile:
    prof = api.load_any(path, version)
    if not isinstance(prof, Profile):
        raise InputError(f"{path}: a rewrites trace, not a profile (name the profile.pkl)")
    if not prof.n_events:
        raise InputError(f"{path}: the profile holds no events (nothing to show)")
    return prof


def load_rewrites_opt(path: Path | None, version: str | None) -> RewriteLog | None:
    if path is None:
        return None
    log = api.load_any(path, version)
    if not isinstance(log, RewriteLog):
        raise InputError(f"{path}: a profile, not a rewrites trace (name the rewrites.pkl)")
    return log


def cmd_report(args: argparse.Namespace) -> int:
    if args.output is not None:
        check_output(args.output)
    with gc_paused():
        prof, log = load_inputs(args.inputs, args.tinygrad_version)
        r = api.report(prof, log, peak_gflops=args.peak_gflops, peak_gbs=args.peak_gbs)
    if args.output is None:
        sys.stdout.write(report_text(r))
        return 0
    write_report(r, args.output)
    print(f"wrote {args.output}: {headline(r)}")
    return 0


def cmd_diff(args: argparse.Namespace) -> int:
    if args.output is not None:
        check_output(args.output)
    v = args.tinygrad_version
    with gc_paused():
        base, pr = load_one_profile(args.base, v), load_one_profile(args.pr, v)
        d = api.diff(base, pr, load_rewrites_opt(args.base_rewrites, v), load_rewrites_opt(args.pr_rewrites, v),
                     alpha=args.alpha, min_effect=args.min_effect / 100)
    if args.output is None:
        sys.stdout.write(diff_text(d))
    else:
        write_diff(d, args.output)
        print(f"wrote {args.output}: {verdict_counts(d)}")
    if args.fail_if_slower is not None:
        slow = d.slowdowns(args.fail_if_slower)
        if slow:
            names = ", ".join(f"{k.label} on {k.device} ({(k.ratio - 1) * 100:+.1f}%)" for k in slow)
            print(f"vizexport: {len(slow)} kernel(s) significantly slower by more than {args.fail_if_slower:g}%: "
                  f"{names}", file=sys.stderr)
            return EXIT_SLOWER
    return 0


def sample_files() -> list[Path]:
    root = resources.files("vizexport.data.sample")
    return [Path(str(root.joinpath("profile.pkl"))), Path(str(root.joinpath("rewrites.pkl")))]


def cmd_demo(args: argparse.Namespace) -> int:
    """Everything on the bundled sample, each input read and decoded once."""
    t0 = time.perf_counter()
    with gc_paused():
        prof, log = load_inputs(sample_files(), args.tinygrad_version)
        launches = api.decode_launches(prof)
        tl = api.build_timeline(prof, log, launches)
    summaries = [api.summarize(prof, launches), api.summarize(log)]
    print("\n".join(map(as_text, summaries)))
    with progress_bar("drawing rewrite steps", "") as progress, atomic_folder(args.output) as tmp:
        api.build_site(tmp, prof, log, progress=progress, timeline=tl, summary=summaries[0], atomic=False)
        api.write_trace(tl, tmp / "trace.json.gz")
        write_atomic(tmp / "info.json", as_json(summaries).encode())
    index = args.output / "index.html"
    print(f"wrote {index}, trace.json.gz and info.json in {time.perf_counter() - t0:.2f} s")
    print(f"open {index} in a browser, or run: vizexport open {args.output / 'trace.pftrace'}")
    return 0


def _warning_line(message: Warning | str, category: type, *_: object, **__: object) -> str:
    return f"vizexport: warning: {message}\n"


def inputs_of(args: argparse.Namespace) -> list[Path]:
    return {"convert": lambda: args.inputs + [p for p in (args.baseline, args.baseline_rewrites) if p],
            "info": lambda: args.files, "open": lambda: [args.trace], "demo": sample_files,
            "top": lambda: args.inputs, "show": lambda: [args.rewrites], "report": lambda: args.inputs,
            "diff": lambda: [p for p in (args.base, args.pr, args.base_rewrites, args.pr_rewrites) if p],
            "history": lambda: history.inputs(args)}[args.command]()


def describe(e: BaseException, args: argparse.Namespace, limit: int | None) -> str:
    """One line for a failure: the file it concerns and what went wrong."""
    names = ", ".join(map(str, inputs_of(args)))
    if isinstance(e, InputError):
        return str(e)
    if isinstance(e, DotMissing):
        return f"{getattr(args, 'output', names)}: {e}"
    if isinstance(e, MemoryError):
        size = f"{limit / GIB:.1f} GiB" if limit else "what the machine has"
        return f"{names}: needs more memory than its limit of {size} (--memory-limit GIB raises it)"
    if isinstance(e, OSError):
        where = e.filename or getattr(args, "output", None) or names
        return f"{where}: {e.strerror or e}"
    if isinstance(e, RecursionError):
        return f"{names}: nests too deeply to read"
    return f"{names}: {type(e).__name__}: {brief(str(e))} (a corrupt input or a bug; --debug shows where)"


COMMAND = {"convert": cmd_convert, "info": cmd_info, "top": cmd_top, "show": cmd_show, "report": cmd_report,
           "diff": cmd_diff, "demo": cmd_demo, "open": cmd_open, "history": lambda a: history.run(a, load_inputs)}


def main(argv: Sequence[str] | None = None) -> int:
    """The command, with one error boundary: every failure after parsing is one line on stderr naming the file,
    exit 1 (2 for usage errors, from argparse), no output left behind (--debug shows the traceback)."""
    warnings.formatwarning = _warning_line  # e.g. a corrupt SQTT blob: one line, decoding goes on
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] not in COMMANDS and argv[0] not in ("-h", "--help", "--version"):
        argv.insert(0, "convert")
    args = parser().parse_args(argv)
    limit = None
    try:
        gib = args.memory_limit
        limit = limit_memory(memory_budget(inputs_of(args)) if gib is None else int(gib * GIB))
        return COMMAND[args.command](args)
    except KeyboardInterrupt:
        print("vizexport: interrupted (no output written)", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `vizexport info … | head`: the reader has all it wants
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the exit's flush must not fail again
        return 141
    except Exception as e:
        if args.debug:
            raise
        print(f"vizexport: error: {describe(e, args, limit)}", file=sys.stderr)
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
