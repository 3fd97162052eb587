"""The `vizexport` command. It wires readers to writers; nothing else does."""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from . import __version__
from .info import as_text, summarize
from .output import atomic_file
from .perfetto import FORMATS, trace_format, write_trace
from .pickles import InputError, gc_paused
from .records import Profile, RewriteLog
from .tinygrad import load_any
from .tinygrad.releases import RELEASES
from .tinygrad.timeline import build_timeline

COMMANDS = ("convert", "info", "demo")
USAGE = """vizexport PROFILE.pkl [REWRITES.pkl] -o OUT.pftrace|OUT.pftrace.gz|OUT.json|OUT.json.gz
       vizexport info FILE... [--json]
       vizexport demo -o OUTDIR"""


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tinygrad-version", choices=RELEASES, metavar="VERSION",
                   help=f"read the pickles as written by this tinygrad release ({', '.join(RELEASES)}); "
                        "default: detected from the content")
    p.add_argument("--debug", action="store_true", help="show a traceback on errors")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vizexport", usage=USAGE, description="Turn tinygrad VIZ/PROFILE pickles into "
                                "files anyone can open (convert is the default command).")
    p.add_argument("--version", action="version", version=f"vizexport {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    conv = sub.add_parser("convert", help="profile (+ rewrites) → Perfetto trace or Chrome JSON (the default)")
    conv.add_argument("inputs", nargs="+", type=Path, metavar="PICKLE",
                      help="a profile.pkl, optionally with its rewrites.pkl (kind detected from content)")
    conv.add_argument("-o", "--output", type=Path, required=True, metavar="OUT",
                      help=f"output file; its name picks the format: {', '.join(FORMATS)}")
    conv.add_argument("--no-compress", action="store_true", help="no compressed_packets in .pftrace output")
    _common(conv)
    info = sub.add_parser("info", help="what a profile.pkl / rewrites.pkl holds: release, events, span, memory peaks")
    info.add_argument("files", nargs="+", type=Path, metavar="FILE")
    info.add_argument("--json", action="store_true", help="print a JSON list instead of text")
    _common(info)
    demo = sub.add_parser("demo", help="run vizexport on its bundled sample (a tinygrad 0.14.0 NULL-device run)")
    demo.add_argument("-o", "--output", type=Path, required=True, metavar="OUTDIR")
    _common(demo)
    return p


def load_inputs(paths: Sequence[Path], version: str | None) -> tuple[Profile, RewriteLog | None]:
    """One profile and at most one rewrites trace, told apart by content."""
    loaded = [load_any(p, version) for p in paths]
    profiles = [x for x in loaded if isinstance(x, Profile)]
    logs = [x for x in loaded if isinstance(x, RewriteLog)]
    if len(profiles) != 1 or len(logs) > 1:
        kinds = ", ".join(f"{p} ({'profile' if isinstance(x, Profile) else 'rewrites'})" for p, x in zip(paths, loaded,
                                                                                                        strict=True))
        raise InputError(f"need one profile.pkl and at most one rewrites.pkl, got: {kinds}")
    return profiles[0], logs[0] if logs else None


def convert(inputs: Sequence[Path], output: Path, version: str | None = None, compress: bool = True,
            quiet: bool = False) -> int:
    if trace_format(output) is None:
        raise InputError(f"{output}: unknown output format (name it {', '.join('*' + f for f in FORMATS)})")
    t0 = time.perf_counter()
    with gc_paused():  # millions of acyclic objects: see pickles.gc_paused
        prof, log = load_inputs(inputs, version)
        tl = build_timeline(prof, log)
        size = write_trace(tl, output, compress=compress)
    if not quiet:
        n = tl.n_events()
        print(f"wrote {output}: {n:,} events on {len(tl.tracks)} tracks, {size:,} bytes "
              f"({size / max(prof.n_events, 1):.1f} B/profile event) in {time.perf_counter() - t0:.2f} s")
    return 0


def cmd_convert(args: argparse.Namespace) -> int:
    return convert(args.inputs, args.output, args.tinygrad_version, not args.no_compress)


def cmd_info(args: argparse.Namespace) -> int:
    summaries = [summarize(load_any(f, args.tinygrad_version)) for f in args.files]
    print(json.dumps(summaries, indent=1) if args.json else "\n".join(map(as_text, summaries)))
    return 0


def sample_files() -> list[Path]:
    root = resources.files("vizexport.data.sample")
    return [Path(str(root.joinpath("profile.pkl"))), Path(str(root.joinpath("rewrites.pkl")))]


def cmd_demo(args: argparse.Namespace) -> int:
    files = sample_files()
    summaries = [summarize(load_any(f, args.tinygrad_version)) for f in files]
    print("\n".join(map(as_text, summaries)))
    convert(files, args.output / "trace.pftrace", args.tinygrad_version)
    convert(files, args.output / "trace.json.gz", args.tinygrad_version)
    with atomic_file(args.output / "info.json") as f:
        f.write(json.dumps(summaries, indent=1).encode())
    print(f"wrote {args.output / 'info.json'}; open the trace at https://ui.perfetto.dev")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] not in COMMANDS and argv[0] not in ("-h", "--help", "--version"):
        argv.insert(0, "convert")
    args = parser().parse_args(argv)
    try:
        return {"convert": cmd_convert, "info": cmd_info, "demo": cmd_demo}[args.command](args)
    except InputError as e:
        if args.debug:
            raise
        print(f"vizexport: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("vizexport: interrupted (no output written)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
