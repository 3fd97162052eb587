"""Throwaway virtualenvs holding one tinygrad release, for maintenance scripts (the package never uses them).

`python tools/tgvenv.py 0.14.0` prints that venv's python. `master` installs the source tree named by $TINYGRAD_SRC.
"""
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(os.environ.get("TGVENV_ROOT", "/tmp/tgvenv"))


def venv_python(version: str) -> str:
    """Create (once) a venv with tinygrad==version and return the path of its python."""
    d = ROOT / version
    py = d / "bin" / "python"
    if not (d / ".ok").exists():
        venv.create(d, with_pip=True, clear=True)
        spec = os.environ["TINYGRAD_SRC"] if version == "master" else f"tinygrad=={version}"
        subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", spec], check=True)
        (d / ".ok").touch()
    return str(py)


if __name__ == "__main__":
    print(venv_python(sys.argv[1]))
