"""The `vizexport` command. It wires readers to writers; nothing else does."""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from . import __version__
from .info import as_text, summarize
from .pickles import InputError
from .tinygrad import load_any
from .tinygrad.releases import RELEASES

SUBCOMMANDS = ("info", "demo")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tinygrad-version", choices=RELEASES, metavar="VERSION",
                   help=f"read the pickles as written by this tinygrad release ({', '.join(RELEASES)}); "
                        "default: detected from the content")
    p.add_argument("--debug", action="store_true", help="show a traceback on errors")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vizexport", description="Turn tinygrad VIZ/PROFILE pickles into files anyone "
                                "can open.", epilog="commands: info FILE... [--json] | demo -o OUTDIR")
    p.add_argument("--version", action="version", version=f"vizexport {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    info = sub.add_parser("info", help="what a profile.pkl / rewrites.pkl holds: release, events, span, memory peaks")
    info.add_argument("files", nargs="+", type=Path, metavar="FILE")
    info.add_argument("--json", action="store_true", help="print a JSON list instead of text")
    _common(info)
    demo = sub.add_parser("demo", help="run vizexport on its bundled sample (a tinygrad 0.14.0 NULL-device run)")
    demo.add_argument("-o", "--output", type=Path, required=True, metavar="OUTDIR")
    _common(demo)
    return p


def cmd_info(args: argparse.Namespace) -> int:
    summaries = [summarize(load_any(f, args.tinygrad_version)) for f in args.files]
    print(json.dumps(summaries, indent=1) if args.json else "\n".join(map(as_text, summaries)))
    return 0


def sample_files() -> list[Path]:
    root = resources.files("vizexport.data.sample")
    return [Path(str(root.joinpath("profile.pkl"))), Path(str(root.joinpath("rewrites.pkl")))]


def cmd_demo(args: argparse.Namespace) -> int:
    summaries = [summarize(load_any(f, args.tinygrad_version)) for f in sample_files()]
    args.output.mkdir(parents=True, exist_ok=True)
    write_atomic(args.output / "info.json", json.dumps(summaries, indent=1).encode())
    print("\n".join(map(as_text, summaries)))
    print(f"wrote {args.output / 'info.json'}")
    return 0


def write_atomic(path: Path, data: bytes) -> None:
    """Write to a temporary file beside `path`, then rename: readers never see a partial file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return {"info": cmd_info, "demo": cmd_demo}[args.command](args)
    except InputError as e:
        if args.debug:
            raise
        print(f"vizexport: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("vizexport: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
