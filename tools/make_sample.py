"""Regenerate vizexport/data/sample/{profile,rewrites}.pkl by running tools/sample_workload.py with tinygrad 0.14.0.

Usage: python tools/make_sample.py   (needs PyPI access for the throwaway venv; see tools/tgvenv.py)
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tgvenv import ROOT, venv_python

TOOLS = Path(__file__).resolve().parent
SAMPLE = TOOLS.parent / "vizexport" / "data" / "sample"
VERSION = "0.14.0"
USER = "vizexport"  # getpass.getuser() reads LOGNAME/USER/LNAME/USERNAME: files become <name>.pkl.vizexport
MAX_SIZE = 300_000


def ensure_venv(version: str, timeout: float = 900) -> str:
    """venv_python(version), but first wait (up to timeout) while another process builds it (dir without .ok)."""
    d = ROOT / version
    deadline = time.monotonic() + timeout
    while d.exists() and not (d / ".ok").exists() and time.monotonic() < deadline:
        time.sleep(5)
    return venv_python(version)


def main() -> None:
    py = ensure_venv(VERSION)
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "DEV", "JIT", "HCQ2")}
        env.update(TMPDIR=tmp, VIZ="-1", DEV="NULL", LOGNAME=USER, USER=USER, LNAME=USER, USERNAME=USER)
        subprocess.run([py, str(TOOLS / "sample_workload.py")], env=env, cwd=tmp, check=True)
        SAMPLE.mkdir(parents=True, exist_ok=True)
        for name in ("profile.pkl", "rewrites.pkl"):
            dst = SAMPLE / name
            shutil.copyfile(Path(tmp) / f"{name}.{USER}", dst)
            size = dst.stat().st_size
            print(f"{dst.relative_to(TOOLS.parent)}: {size} bytes")
            if size > MAX_SIZE:
                print(f"warning: {name} is larger than {MAX_SIZE} bytes", file=sys.stderr)
    (SAMPLE / "__init__.py").touch()


if __name__ == "__main__":
    main()
