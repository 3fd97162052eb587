"""SQTT decoding speed: vizexport.sqtt.decode vs tinygrad 0.14.0's own decoder (tinygrad.renderer.amd.sqtt.decode).

Every SQTT blob of the fixture pickles (../shared/fixtures/sqtt, 300 blobs) is decoded by each side in its own child
process (tinygrad's in a tinygrad 0.14.0 venv made by tools/tgvenv.py), runs alternating, best of --repeat each; imports
happen before the clock starts, vizexport's lazily built look-up tables are inside the first timed run. Packet counts
per blob must be identical (exit 1 otherwise). Also shown: vizexport's decode plus wave/issue extraction (analyze).

Usage: python benchmarks/bench_sqtt.py [--fixtures DIR] [--repeat K]
"""
import argparse
import json
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))
from tgvenv import venv_python  # noqa: E402 (tools/ is not a package)

import vizexport  # noqa: E402

CHILD = """
import json, pickle, sys, time
{imports}
blobs = pickle.load(open(sys.argv[1], "rb"))
times, counts = [], None
for _ in range(int(sys.argv[2])):
    t = time.perf_counter()
    counts = [{count} for b in blobs]
    times.append(time.perf_counter() - t)
print(json.dumps({{"best": min(times), "first": times[0], "counts": counts}}))
"""
TINYGRAD = {"imports": "from tinygrad.renderer.amd.sqtt import decode", "count": "sum(1 for _ in decode(b))"}
VIZEXPORT = {"imports": "from vizexport.sqtt import decode", "count": "len(decode(b))"}
ANALYZE = {"imports": "from vizexport.sqtt import analyze, decode", "count": "len(analyze(decode(b)).packets)"}


def fixture_blobs(folder: Path) -> list[bytes]:
    blobs = []
    for f in sorted(folder.glob("*/*.pkl")):
        blobs += [bytes(c.blob) for c in vizexport.load_profile(f).captures if c.kind == "sqtt"]
    return blobs


def run(python: str, code: dict, path: Path, repeat: int) -> dict:
    out = subprocess.run([python, "-c", CHILD.format(**code), str(path), str(repeat)], capture_output=True, text=True,
                         check=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fixtures", type=Path, default=ROOT.parent / "shared" / "fixtures" / "sqtt")
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    blobs = fixture_blobs(a.fixtures)
    if not blobs:
        sys.exit(f"no SQTT blobs under {a.fixtures}")
    tg_python = venv_python("0.14.0")
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "blobs.pkl"
        path.write_bytes(pickle.dumps(blobs))
        results: dict[str, list[dict]] = {"tg": [], "vx": [], "an": []}
        for _ in range(2):  # alternate the sides so that a busy machine hurts both alike
            results["tg"].append(run(tg_python, TINYGRAD, path, a.repeat))
            results["vx"].append(run(sys.executable, VIZEXPORT, path, a.repeat))
            results["an"].append(run(sys.executable, ANALYZE, path, a.repeat))
    tg, vx, an = (min(r, key=lambda x: x["best"]) for r in results.values())
    n = sum(vx["counts"])
    same = tg["counts"] == vx["counts"] == an["counts"]
    print(f"SQTT blobs: {len(blobs)} from {a.fixtures} ({sum(map(len, blobs)) / 1e6:.2f} MB), best of {2 * a.repeat}")
    print(f"  packets: tinygrad {sum(tg['counts']):,}, vizexport {n:,} — identical per blob: {'yes' if same else 'NO'}")
    print(f"  tinygrad 0.14.0 sqtt.decode    : {tg['best']:7.3f} s  ({n / tg['best'] / 1e6:5.2f} M packets/s)")
    print(f"  vizexport sqtt.decode          : {vx['best']:7.3f} s  ({n / vx['best'] / 1e6:5.2f} M packets/s; "
          f"first run, tables included: {vx['first']:.3f} s)")
    print(f"  vizexport decode + analyze     : {an['best']:7.3f} s  (waves, issues, markers)")
    print(f"  ratio tinygrad/vizexport       : {tg['best'] / vx['best']:.1f}× faster (target ≥ 3×); "
          f"with analyze {tg['best'] / an['best']:.1f}×")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
