"""Copy a profile with every launch of one kernel made N times longer: a pair of real runs that differ in exactly
one kernel, for the regression verdicts of `vizexport diff` and `vizexport history check` (issue #35).

Usage: python tools/slow_copy.py PROFILE.pkl OUT.pkl NAME [--factor 2.0] [--device D]
  NAME: the kernel's name as `vizexport top` shows it; every program of that name (on --device, default: every
  device) is slowed, range events and JIT graph entries alike. The profile is read by vizexport's own safe reader
  and pickled back under tinygrad's class names (tests/repickle.py), so the copy reads as tinygrad's files do.
  Programs are found by their profile_key (tinygrad 0.14+); prints how many launches changed.
"""
import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import vizexport  # noqa: E402
from tests.repickle import slow_down  # noqa: E402
from vizexport.analysis.launches import kernel_runs  # noqa: E402


def programs_of(profile: Path, name: str, device: str | None) -> set[bytes]:
    runs = kernel_runs(vizexport.build_timeline(vizexport.load_profile(profile)))
    return {bytes.fromhex(r.kernel.program) for r in runs
            if r.kernel.name == name and r.kernel.program and device in (None, r.kernel.device)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("profile", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("name")
    ap.add_argument("--factor", type=float, default=2.0)
    ap.add_argument("--device")
    a = ap.parse_args()
    keys = programs_of(a.profile, a.name, a.device)
    if not keys:
        sys.exit(f"slow_copy: {a.profile}: no launches of a program named {a.name!r} with a profile_key")
    changed = slow_down(a.profile, a.out, keys, a.factor)
    print(f"wrote {a.out}: {changed} launches of {a.name} ({len(keys)} programs) made {a.factor:g}× as long")


if __name__ == "__main__":
    main()
