"""Seconds from start to the first words on a terminal (stderr on a pseudo-terminal), for a conversion of the
1,000,000-event profile and for the bundled sample's site (issue #34: within a second).

Usage: python benchmarks/bench_first_words.py [--profile PKL] [--repeat N]
"""
import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.conftest import on_terminal  # noqa: E402 - the tests' pty reader

SAMPLE = ROOT / "vizexport" / "data" / "sample"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profile", type=Path, default=Path("/tmp/vizexport-bench/profile_1000000.pkl"))
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cases = {"sample site": (SAMPLE / "profile.pkl", SAMPLE / "rewrites.pkl", "-o", Path(tmp) / "site")}
        if a.profile.exists():
            cases["1M-event trace"] = (a.profile, "-o", Path(tmp) / "t.pftrace")
        for name, args in cases.items():
            firsts = [on_terminal(*args)[0] for _ in range(a.repeat)]
            shown = ", ".join("none" if f is None else f"{f:.2f}" for f in firsts)
            print(f"{name}: first words on the terminal after {shown} s", flush=True)


if __name__ == "__main__":
    main()
