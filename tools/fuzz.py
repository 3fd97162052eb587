"""Hostile input, at scale: seeded mutations of real pickles (cuts, bit flips, duplicated, deleted or overwritten
bytes) run through vizexport one by one, each in a forked child, and judged as a user would see them: exit code,
stderr, time, peak memory, files left behind.

A case fails when it prints a traceback, ends in anything but exit 0 or 1, prints an error that is not one line
naming the file, runs past the time limit, peaks above the memory bound (vizexport.limits: 1 GiB + 16 × input), or
leaves an output behind after an error (or a temporary file ever).

Modes: `convert` (the command, to .pftrace), `info` (the command), `graphs` (a rewrites trace replayed, and the
steps the SVG export draws drawn as DOT and diffed, without waiting on Graphviz).

Usage: python tools/fuzz.py [--cases N] [--seed S] [--timeout SEC] [FILE ...]
       (default files: the bundled sample; with ../shared/fixtures present, every fixture too)
"""
from __future__ import annotations

import argparse
import os
import random
import resource
import signal
import sys
import tempfile
import time
import traceback
import warnings
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from vizexport import api  # noqa: E402
from vizexport.cli import main as cli_main  # noqa: E402
from vizexport.errors import InputError  # noqa: E402
from vizexport.graphs.diff import match_diff  # noqa: E402
from vizexport.graphs.dot import Drawer  # noqa: E402
from vizexport.graphs.export import policy  # noqa: E402
from vizexport.limits import limit_memory, memory_budget  # noqa: E402
from vizexport.output import TMP_SUFFIX  # noqa: E402

MUTATIONS = ("cut", "flip", "duplicate", "delete", "overwrite")
KEEP = ("case.pkl", "stdout", "stderr")


def mutate(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    """One seeded mutation of `data`: (what was done, the bytes)."""
    kind = rng.choice(MUTATIONS)
    n = len(data)
    at = rng.randrange(n)
    size = min(n - at, rng.choice((1, 2, 4, 8, 64, 1024)))
    if kind == "cut":
        return f"cut at {at}", data[:at]
    if kind == "flip":
        bits = rng.randrange(1, 4)
        out = bytearray(data)
        for _ in range(bits):
            i = rng.randrange(n)
            out[i] ^= 1 << rng.randrange(8)
        return f"{bits} bit flip(s) near {at}", bytes(out)
    if kind == "duplicate":
        return f"{size} bytes at {at} doubled", data[:at + size] + data[at:]
    if kind == "delete":
        return f"{size} bytes at {at} deleted", data[:at] + data[at + size:]
    return f"{size} bytes at {at} overwritten", data[:at] + rng.randbytes(size) + data[at + size:]


@dataclass
class Outcome:
    case: str
    mode: str
    rc: int | None  # None: killed at the time limit
    stderr: str
    seconds: float
    peak: int  # bytes, the child's peak RSS
    bound: int  # bytes it may use
    files: list[str] = field(default_factory=list)  # what the case left in its folder

    def problems(self, timeout: float) -> list[str]:
        out = []
        lines = self.stderr.splitlines()
        errors = [ln for ln in lines if ln.startswith("vizexport: error:")]
        if self.rc is None or self.seconds > timeout:
            out.append("hang")
        if "Traceback" in self.stderr:
            out.append("traceback")
        if self.rc not in (0, 1, None):
            out.append(f"exit {self.rc}")
        if self.rc == 1 and (len(lines) - sum(ln.startswith("vizexport: warning:") for ln in lines) != 1 or
                             len(errors) != 1 or "case.pkl" not in errors[0]):
            out.append("not one error line naming the file")
        if self.peak > self.bound:
            out.append("memory over the bound")
        if any(f.endswith(TMP_SUFFIX) for f in self.files) or (self.rc != 0 and set(self.files) - set(KEEP)):
            out.append("output left behind")
        return out


def _graphs(case: Path) -> int:
    """Replay every rewrite and draw every step, as the SVG export does (the command's error boundary in small)."""
    try:
        graphs = api.step_graphs(api.load_rewrites(case))
    except InputError as e:
        print(f"vizexport: error: {e}", file=sys.stderr)
        return 1
    for c in graphs.contexts:
        session = graphs.session()
        drawer = Drawer(session.nodes, 400)
        printed: dict[int, list[str]] = {}
        for rw in c.rewrites:
            steps = session.replay(rw).steps
            for step in (steps[i] for i in sorted(policy(steps, "default"))):  # the steps the export draws
                drawer.draw(step)
                if step.before is not None and step.after is not None:
                    match_diff(session.nodes, step.before, step.after, printed)
    return 0


def _child(case: Path, mode: str) -> int:
    if mode == "convert":
        return cli_main([str(case), "-o", str(case.parent / "out.pftrace")])
    if mode == "info":
        return cli_main(["info", str(case)])
    limit_memory(memory_budget([case]))
    return _graphs(case)


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int, file: object = None,
                  line: str | None = None) -> None:
    sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


def run_case(data: bytes, mode: str, folder: Path, label: str, timeout: float) -> Outcome:
    """Run one case in a forked child (its own folder, stdout and stderr to files) and judge what it did."""
    for f in folder.iterdir():
        f.unlink()
    case = folder / "case.pkl"
    case.write_bytes(data)
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        rc = 70
        try:
            for fd, name in ((1, "stdout"), (2, "stderr")):
                os.dup2(os.open(folder / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), fd)
            # the streams themselves too: under pytest they are capture objects, not the file descriptors
            sys.stdout, sys.stderr = open(1, "w", closefd=False), open(2, "w", closefd=False)
            warnings.resetwarnings()  # and warnings printed as the command prints them (pytest records them)
            warnings.showwarning = _show_warning
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            rc = _child(case, mode)
        except BaseException:  # a traceback the command would print
            traceback.print_exc()
            rc = 70
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(rc)
    rc, usage = None, None
    while time.perf_counter() - t0 < timeout:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            rc = os.waitstatus_to_exitcode(status)
            break
        time.sleep(0.002)
    else:
        os.kill(pid, signal.SIGKILL)
        _, _, usage = os.wait4(pid, 0)
    seconds = time.perf_counter() - t0
    return Outcome(label, mode, rc, (folder / "stderr").read_text(errors="replace"), seconds,
                   usage.ru_maxrss * 1024, memory_budget([case]), sorted(f.name for f in folder.iterdir()))


def cases(files: list[Path], n: int, seed: int) -> Iterator[tuple[str, str, bytes]]:
    """(label, mode, bytes): n seeded mutations per file, made one at a time (a forked case inherits what the
    harness holds: thousands of inputs kept at once would count in every case's memory)."""
    for f in files:
        data = f.read_bytes()
        mode = "graphs" if b"RewriteTrace" in data[:4096] or "rewrites" in f.name else "convert"
        rng = random.Random(f"{seed}:{f.name}:{len(data)}")
        for _ in range(n):
            what, mutated = mutate(data, rng)
            yield f"{f.name}: {what}", mode, mutated


def time_limit(base: float, size: int) -> float:
    """Seconds a case of `size` bytes may take: `base`, and 10 s more per MB (the largest fixture's rewrites trace,
    3.3 MB, takes 22 s to replay and draw unmodified)."""
    return base + 10.0 * size / 1e6


def fuzz(files: list[Path], n: int, seed: int, timeout: float, log: bool = True) -> tuple[list[Outcome], list]:
    """Every case; returns the outcomes and the failures as (outcome, problems)."""
    outcomes, failures = [], []
    with tempfile.TemporaryDirectory(prefix="vizexport-fuzz-") as tmp:
        for label, mode, data in cases(files, n, seed):
            limit = time_limit(timeout, len(data))
            o = run_case(data, mode, Path(tmp), label, limit)
            outcomes.append(o)
            if p := o.problems(limit):
                failures.append((o, p))
                if log:
                    print(f"FAIL {label} [{mode}]: {', '.join(p)}\n  {o.stderr.strip()[-400:]}", flush=True)
    return outcomes, failures


def default_files() -> list[Path]:
    sample = ROOT / "vizexport" / "data" / "sample"
    fixtures = ROOT.parent / "shared" / "fixtures"
    found = sorted(fixtures.rglob("*.pkl")) if fixtures.is_dir() else []
    return [sample / "profile.pkl", sample / "rewrites.pkl", *found]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--cases", type=int, default=100, help="mutations per file (default 100)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds a case may take, plus 10 per MB (default 30)")
    args = ap.parse_args()
    files = args.files or default_files()
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    t0 = time.perf_counter()
    outcomes, failures = fuzz(files, args.cases, args.seed, args.timeout)
    worst_t = max(outcomes, key=lambda o: o.seconds)
    worst_m = max(outcomes, key=lambda o: o.peak / o.bound)
    rcs = Counter(o.rc for o in outcomes)
    print(f"{len(outcomes)} cases from {len(files)} files in {time.perf_counter() - t0:.0f} s: exit codes "
          f"{dict(rcs)}, {len(failures)} failing")
    print(f"  slowest {worst_t.seconds:.2f} s ({worst_t.case}); most memory {worst_m.peak / 2**20:.0f} MiB of its "
          f"{worst_m.bound / 2**20:.0f} MiB bound ({worst_m.case})")
    kinds = Counter(p for _, ps in failures for p in ps)
    if kinds:
        print("  failures: " + ", ".join(f"{k} ×{v}" for k, v in kinds.items()))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
