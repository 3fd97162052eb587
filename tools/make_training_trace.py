"""Make the training-step rewrites trace for benchmarks/bench_rewrites.py: tools/training_workload.py run with
tinygrad 0.14.0 on the NULL device (VIZ=-1: the trace is recorded, no viewer is started).

Usage: python tools/make_training_trace.py [OUT]   (default OUT: $TMPDIR/vizexport-bench/training-rewrites.pkl;
needs PyPI access for the throwaway venv, see tools/tgvenv.py; takes about half a minute)
"""
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from make_sample import USER, ensure_venv

TOOLS = Path(__file__).resolve().parent
VERSION = "0.14.0"
DEFAULT = Path(tempfile.gettempdir()) / "vizexport-bench" / "training-rewrites.pkl"


def make(out: Path = DEFAULT) -> Path:
    py = ensure_venv(VERSION)
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "DEV", "JIT", "HCQ2", "PYTHONPATH")}
        env.update(TMPDIR=tmp, VIZ="-1", DEV="NULL", LOGNAME=USER, USER=USER, LNAME=USER, USERNAME=USER)
        subprocess.run([py, str(TOOLS / "training_workload.py")], env=env, cwd=tmp, check=True)
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(Path(tmp) / f"rewrites.pkl.{USER}", out)
    return out


if __name__ == "__main__":
    path = make(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT)
    print(f"{path}: {path.stat().st_size} bytes")
