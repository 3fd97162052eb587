"""Make the benchmark runs: a workload run with tinygrad 0.14.0 (VIZ=-1: profile and rewrites are recorded, no
viewer is started), its profile.pkl and rewrites.pkl kept in one folder.

  training  tools/training_workload.py: one training step of a small CNN on NULL (about 49,000 matches; the trace
            benchmarks/bench_rewrites.py renders)
  mlp       tools/mlp_workload.py: a 2-layer MLP, 5 Adam steps and a JIT'd inference (the site benchmark's run)

Usage: python tools/make_training_trace.py [--workload training|mlp] [--device NULL|CPU] [OUTDIR]
  (default OUTDIR: $TMPDIR/vizexport-bench/<workload>-<device>/; needs PyPI access for the throwaway venv, see
  tools/tgvenv.py; CPU needs clang on PATH; takes under a minute)
"""
import argparse
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from make_sample import USER, ensure_venv

TOOLS = Path(__file__).resolve().parent
VERSION = "0.14.0"
WORKLOADS = {"training": "training_workload.py", "mlp": "mlp_workload.py"}
BENCH = Path(tempfile.gettempdir()) / "vizexport-bench"


def make(workload: str = "training", device: str = "NULL", out: Path | None = None) -> Path:
    """Run the workload; return the folder holding its profile.pkl and rewrites.pkl."""
    out = out or BENCH / f"{workload}-{device.lower()}"
    py = ensure_venv(VERSION)
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "DEV", "JIT", "HCQ2", "PYTHONPATH")}
        env.update(TMPDIR=tmp, VIZ="-1", DEV=device, LOGNAME=USER, USER=USER, LNAME=USER, USERNAME=USER)
        subprocess.run([py, str(TOOLS / WORKLOADS[workload])], env=env, cwd=tmp, check=True)
        out.mkdir(parents=True, exist_ok=True)
        for name in ("profile.pkl", "rewrites.pkl"):
            shutil.copyfile(Path(tmp) / f"{name}.{USER}", out / name)
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?", type=Path)
    ap.add_argument("--workload", choices=WORKLOADS, default="training")
    ap.add_argument("--device", default="NULL")
    a = ap.parse_args()
    folder = make(a.workload, a.device, a.out)
    for f in sorted(folder.iterdir()):
        print(f"{f}: {f.stat().st_size:,} bytes")
