"""`vizexport history add | check | site | list`: the subcommands' parser and commands. cli.py registers them
(`add_parser`, `run`, `inputs`) and hands over its loader of profile and rewrites pickles."""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from ..analysis.stats import ALPHA, MIN_EFFECT
from ..errors import InputError
from ..forks import SERIAL, Executor
from ..output import write_atomic
from ..records import to_json
from ..report import standalone
from ..report.render import as_markdown, as_text
from ..run import TOP_STAGES, LoadOptions, Run
from ..writers import classify
from . import sections
from .check import Check, check_run
from .records import RunMeta, RunRecord, run_record
from .site import LAST, write_site
from .store import is_url, normal_time, open_store

EXIT_SLOWER = 3  # `--fail-if-slower` (diff, history check): a kernel got significantly slower by more than allowed
USAGE = """vizexport history add STORE PROFILE.pkl [REWRITES.pkl] --commit SHA --branch NAME [--time T] [--label K=V]
       vizexport history check STORE PROFILE.pkl [REWRITES.pkl] --branch NAME [--last N] [--fail-if-slower PCT]
                               [-o CHECK.md|.json|.html]
       vizexport history site STORE -o OUTDIR [--branch NAME] [--last N]
       vizexport history list STORE [--branch NAME] [--json]
  STORE: a SQLite file, or a postgresql:// URL (pip install 'vizexport[postgres]')"""


def verdict_options(p: argparse.ArgumentParser) -> None:
    """The options of a verdict a CI acts on: `diff`'s and `history check`'s."""
    p.add_argument("--fail-if-slower", type=float, metavar="PCT", help=f"exit with code {EXIT_SLOWER} when a kernel "
                   "is significantly slower by more than PCT percent")
    p.add_argument("--alpha", type=float, default=ALPHA, help=f"significance level (default {ALPHA})")
    p.add_argument("--min-effect", type=float, default=MIN_EFFECT * 100, metavar="PCT", help="a smaller change is "
                   f"never significant, and unchanged means within ±PCT (default {MIN_EFFECT * 100:g})")


def add_parser(sub: argparse._SubParsersAction, common: Callable[[argparse.ArgumentParser], None]) -> None:
    """`history` and its subcommands; `common`: the flags every command has (cli._common)."""
    h = sub.add_parser("history", usage=USAGE, help="a store of runs (SQLite file or PostgreSQL): add runs, check a "
                       "run against the last N of its branch (exit 3 with --fail-if-slower), a static trend site")
    hs = h.add_subparsers(dest="history_command", required=True, prog="vizexport history",
                          metavar="add|check|site|list")
    add = hs.add_parser("add", help="keep a run: per kernel its launch durations, device totals, metadata")
    _store_and_inputs(add)
    add.add_argument("--commit", required=True, metavar="SHA", help="the commit the run measured")
    add.add_argument("--branch", required=True, metavar="NAME", help="its branch (checks compare within a branch)")
    add.add_argument("--time", metavar="T", help="when it ran: ISO 8601 (no zone: UTC) or Unix seconds; default now")
    add.add_argument("--label", action="append", default=[], metavar="K=V", help="a label kept with the run "
                     "(e.g. runner=ci-2); repeat for more")
    chk = hs.add_parser("check", help="this run against the last N runs of a branch: per kernel slower, faster, "
                        "unchanged or inconclusive")
    _store_and_inputs(chk)
    chk.add_argument("--branch", required=True, metavar="NAME", help="compare with this branch's runs (e.g. main)")
    chk.add_argument("--commit", default="(this run)", metavar="SHA", help="the commit this run measured (shown)")
    chk.add_argument("--time", metavar="T", help="when it ran (shown; as for add); default now")
    chk.add_argument("--last", type=int, default=LAST, metavar="N", help=f"the newest N runs (default {LAST})")
    chk.add_argument("-o", "--output", type=Path, metavar="OUT", help="CHECK.md (a pull-request comment), .json or "
                     ".html; default: text on stdout")
    verdict_options(chk)
    site = hs.add_parser("site", help="a static page: per kernel and device its trend over the commits, change points "
                         "marked, the latest run's verdicts, every run")
    site.add_argument("store", metavar="STORE")
    site.add_argument("-o", "--output", type=Path, required=True, metavar="OUTDIR")
    site.add_argument("--branch", metavar="NAME", help="only this branch's runs (default: the latest run's branch)")
    site.add_argument("--last", type=int, metavar="N", help="only the newest N runs")
    lst = hs.add_parser("list", help="the stored runs, oldest first")
    lst.add_argument("store", metavar="STORE")
    lst.add_argument("--branch", metavar="NAME")
    lst.add_argument("--json", action="store_true", help="print JSON")
    for p in (add, chk, site, lst):
        common(p)


def _store_and_inputs(p: argparse.ArgumentParser) -> None:
    p.add_argument("store", metavar="STORE", help="a SQLite file or a postgresql:// URL")
    p.add_argument("inputs", nargs="*", type=Path, metavar="PICKLE", help="the run's profile.pkl, optionally with "
                   "its rewrites.pkl (categories); none: tinygrad's latest pickles, where it writes them")


def _check_output(path: Path) -> None:
    """Refuse an output name `history check` cannot write (it writes what `report` does: .md, .json, .html)."""
    classify("report", path)


def inputs(args: argparse.Namespace) -> list[Path]:
    """The files a history command reads (for the memory budget and error messages)."""
    store = [] if is_url(args.store) else [Path(args.store)]
    return store + list(getattr(args, "inputs", []))


def run(args: argparse.Namespace, executor: Executor = SERIAL) -> int:
    """`vizexport history …`; `executor`: the command's, which reads a big profile in its workers too."""
    if getattr(args, "last", None) is not None and args.last < 1:
        raise InputError(f"--last {args.last}: must be at least 1")
    if args.history_command in ("add", "check"):
        return (_add if args.history_command == "add" else _check)(args, executor)
    return {"site": _site, "list": _list}[args.history_command](args)


def _record(args: argparse.Namespace, meta: RunMeta, executor: Executor) -> RunRecord:
    run = Run(tuple(args.inputs), load=LoadOptions(args.tinygrad_version), executor=executor)
    prof = run.need_profile()
    meta.file, meta.release = Path(prof.path).name, prof.release.name
    return run_record(run.stage(TOP_STAGES), meta)  # launch times: the device tracks alone


def _labels(pairs: list[str]) -> dict[str, str]:
    out = {}
    for p in pairs:
        k, eq, v = p.partition("=")
        if not eq or not k.strip():
            raise InputError(f"--label {p}: not KEY=VALUE")
        out[k.strip()] = v
    return out


def _add(args: argparse.Namespace, executor: Executor) -> int:
    meta = RunMeta(args.commit, args.branch, normal_time(args.time), _labels(args.label), "", "", 0, 0, 0)
    record = _record(args, meta, executor)
    with open_store(args.store, create=True) as store:
        run_id = store.add(record)
    print(f"added run {run_id} to {store.where}: {meta.commit[:10]} on {meta.branch}, {len(record.kernels)} kernels, "
          f"{meta.launches:,} launches")
    return 0


def _check(args: argparse.Namespace, executor: Executor) -> int:
    if args.output is not None:
        _check_output(args.output)
    record = _record(args, RunMeta("", "", normal_time(args.time), {}, "", "", 0, 0, 0), executor)
    with open_store(args.store) as store:
        earlier = store.load(store.runs(args.branch, args.last))
    record.meta.branch, record.meta.commit = args.branch, args.commit
    c = check_run(record, earlier, args.alpha, args.min_effect / 100)
    if args.output is None:
        sys.stdout.write(as_text(sections.title(c), sections.headline(c), sections.sections(c)))
    else:
        write_check(c, args.output)
        print(f"wrote {args.output}: {sections.headline(c)}")
    if args.fail_if_slower is not None and (slow := c.slowdowns(args.fail_if_slower)):
        names = ", ".join(f"{k.name} on {k.device} ({(k.ratio or 1) * 100 - 100:+.1f}%)" for k in slow)
        print(f"vizexport: {len(slow)} kernel(s) significantly slower by more than {args.fail_if_slower:g}%: {names}",
              file=sys.stderr)
        return EXIT_SLOWER
    return 0


def write_check(c: Check, path: Path) -> None:
    """`path`'s suffix picks the format: .md (a pull-request comment), .json, .html."""
    _check_output(path)
    title, line, secs = sections.title(c), sections.headline(c), sections.sections(c)
    suffix = path.suffix.lower()
    if suffix == ".json":
        data = json.dumps(to_json(c), indent=1, allow_nan=False)
    elif suffix == ".md":
        data = as_markdown(title, line, secs)
    else:
        data = standalone(title, "history", line, secs, {})
    write_atomic(path, data.encode())


def _site(args: argparse.Namespace) -> int:
    with open_store(args.store) as store:
        index = write_site(store, args.output, args.branch, args.last)
    print(f"wrote {index}")
    return 0


def _list(args: argparse.Namespace) -> int:
    with open_store(args.store) as store:
        runs = store.runs(args.branch)
    if args.json:
        print(json.dumps([to_json(m) for m in runs], indent=1))
        return 0
    for m in runs:
        labels = " ".join(f"{k}={v}" for k, v in sorted(m.labels.items()))
        print(f"{m.id:>6}  {m.time[:19].replace('T', ' ')}  {m.branch:<16} {m.commit[:12]:<12}  {m.launches:>8,} "
              f"launches  {m.file}{'  ' + labels if labels else ''}")
    if not runs:
        print("(no runs)")
    return 0


