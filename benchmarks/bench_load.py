"""Loading a 1,000,000-event profile: vizexport.load_profile vs pickle.load with tinygrad 0.14.0's own classes.

Both run in fresh child processes (imports done before the clock starts), best of --repeat runs; peak RSS is the
child's ru_maxrss. Prints seconds, peak RSS and the ratios. The big profile is generated once from a real fixture
(benchmarks/make_big_profile.py, in a tinygrad 0.14.0 venv made by tools/tgvenv.py).

Usage: python benchmarks/bench_load.py [--events N] [--source PKL] [--repeat K]
"""
import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
from tgvenv import venv_python  # noqa: E402 (tools/ is not a package)

CHILD = """
import json, resource, sys, time
{imports}
t = time.perf_counter()
{load}
dt = time.perf_counter() - t
print(json.dumps({{"seconds": dt, "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "n": {count}}}))
"""
TINYGRAD = {"imports": "import pickle, tinygrad, tinygrad.device, tinygrad.helpers, tinygrad.uop.ops, "
            "tinygrad.runtime.ops_amd", "load": "x = pickle.load(open(sys.argv[1], 'rb'))", "count": "len(x)"}
# the package face is lazy: the API is imported with the imports, not inside the timed load
VIZEXPORT = {"imports": "import vizexport, vizexport.api", "load": "x = vizexport.load_profile(sys.argv[1])",
             "count": "x.n_events"}


def run(python: str, code: dict, path: Path) -> dict:
    out = subprocess.run([python, "-c", CHILD.format(**code), str(path)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def best(python: str, code: dict, path: Path, repeat: int) -> dict:
    runs = [run(python, code, path) for _ in range(repeat)]
    return {"seconds": min(r["seconds"] for r in runs), "rss": min(r["rss"] for r in runs), "n": runs[0]["n"]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--source", type=Path, default=ROOT / "vizexport" / "data" / "sample" / "profile.pkl")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/vizexport-bench"))
    a = ap.parse_args()
    tg_python = venv_python("0.14.0")
    a.workdir.mkdir(parents=True, exist_ok=True)
    big = a.workdir / f"profile_{a.events}.pkl"
    if not big.exists():
        subprocess.run([tg_python, str(ROOT / "benchmarks" / "make_big_profile.py"), str(a.source), str(a.events),
                        str(big)], check=True)
    tg = best(tg_python, TINYGRAD, big, a.repeat)
    vx = best(sys.executable, VIZEXPORT, big, a.repeat)
    assert tg["n"] == vx["n"], (tg, vx)
    mb = big.stat().st_size / 1e6
    print(f"profile: {big} ({vx['n']:,} events, {mb:.1f} MB), best of {a.repeat}")
    print(f"  tinygrad 0.14.0 pickle.load : {tg['seconds']:7.2f} s  peak RSS {tg['rss'] / 2**20:7.0f} MiB")
    print(f"  vizexport.load_profile      : {vx['seconds']:7.2f} s  peak RSS {vx['rss'] / 2**20:7.0f} MiB")
    print(f"  ratio vizexport/tinygrad    : time {vx['seconds'] / tg['seconds']:.2f}×, "
          f"peak RSS {vx['rss'] / tg['rss']:.2f}×  (target ≤ 1.00× for both)")


if __name__ == "__main__":
    main()
