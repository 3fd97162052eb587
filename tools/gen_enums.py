"""Generate vizexport/data/enums/<release>.json: tinygrad enum tables (value -> name) per release, and the names its
dtypes print under (DType.name -> the `dtypes.<attribute>` its repr uses: 'unsigned int' -> 'uint').

Each release is imported in a throwaway venv (tools/tgvenv.py); master is a `git archive` of MASTER from the
tinygrad mirror, run with the 0.14.0 venv's python and the archive on PYTHONPATH.

    python tools/gen_enums.py            # regenerate, write, and diff against ../shared/fixtures/tinygrad
    python tools/gen_enums.py --check    # only compare the committed files with freshly generated ones
"""

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from tgvenv import ROOT, venv_python  # tools/ is sys.path[0] when run as a script

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "vizexport" / "data" / "enums"
FIXTURES = REPO.parent / "shared" / "fixtures" / "tinygrad"
MIRROR = os.environ.get("TINYGRAD_GIT", "/work/.mirror/tinygrad+tinygrad/repo")
MASTER = "a9069c177a9da9cca18593edf55acd2e6073cca6"
RELEASES = ["0.10.0", "0.10.1", "0.10.2", "0.10.3", "0.11.0", "0.12.0", "0.13.0", "0.14.0", "master"]
FIXTURE_DIR = {"master": "HEAD"}
# candidate defining modules, tried in order; if none has the class, the package's sources are scanned for it
CANDIDATES = {
    "Ops": ["tinygrad.uop", "tinygrad.uop.ops", "tinygrad.ops"],
    "AxisType": ["tinygrad.uop.ops", "tinygrad.uop", "tinygrad.codegen.opt", "tinygrad.shape.shapetracker"],
    "AddrSpace": ["tinygrad.dtype", "tinygrad.uop.ops", "tinygrad.uop"],
    "OptOps": ["tinygrad.codegen.opt", "tinygrad.codegen.opt.kernel", "tinygrad.renderer", "tinygrad.codegen.kernel"],
}
SNIPPET = r"""
import enum, importlib, json, pathlib, sys, tinygrad
def get(mod, name):
    try: cls = getattr(importlib.import_module(mod), name, None)
    except Exception: return None
    return cls if isinstance(cls, enum.EnumMeta) else None
def scan(name):
    root = pathlib.Path(tinygrad.__file__).parent
    for f in sorted(root.rglob("*.py")):
        if f"class {name}(" in f.read_text(errors="replace"):
            mod = ".".join(("tinygrad",) + f.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
            yield mod
out = {}
for name, mods in json.loads(sys.argv[1]).items():
    cls = next((c for m in [*mods, *scan(name)] if (c := get(m, name)) is not None), None)
    if cls is not None: out[name] = {"module": cls.__module__, "values": {str(m.value): m.name for m in cls}}
import tinygrad.dtype
dtypes = dict(getattr(tinygrad.dtype, "INVERSE_DTYPES_DICT", {}))
print(json.dumps({"file": tinygrad.__file__, "enums": out, "dtypes": dtypes}))
"""


def release_python(version: str, wait: float = 900) -> str:
    """venv_python(), but wait for a venv another process is still creating (no .ok yet) rather than clobber it."""
    d, deadline = ROOT / version, time.monotonic() + wait
    while d.exists() and not (d / ".ok").exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"{d} exists without .ok after {wait:.0f}s; remove it if it is stale")
        time.sleep(5)
    return venv_python(version)


def run_snippet(python: str, pythonpath: str | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    cmd = [python, "-c", SNIPPET, json.dumps(CANDIDATES)]
    return json.loads(subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout)


def generate(release: str) -> dict:
    if release != "master":
        res, source = run_snippet(release_python(release)), f"tinygrad {release} wheel (PyPI)"
        assert str(ROOT / release) in res["file"], res["file"]
    else:
        with tempfile.TemporaryDirectory() as tmp:
            tar = Path(tmp) / "src.tar"
            subprocess.run(["git", "-C", MIRROR, "archive", "-o", tar, MASTER, "tinygrad"], check=True)
            with tarfile.open(tar) as t:
                t.extractall(tmp, filter="data")
            res, source = run_snippet(release_python("0.14.0"), tmp), f"tinygrad master {MASTER[:10]}"
            assert res["file"].startswith(tmp), res["file"]
    return {"release": release, "source": source, "enums": res["enums"], "dtypes": res["dtypes"]}


def dump(table: dict) -> str:
    return json.dumps(table, indent=1, sort_keys=True) + "\n"


def fixture_diff(table: dict) -> list[str]:
    f = FIXTURES / FIXTURE_DIR.get(table["release"], table["release"]) / "enums.json"
    if not f.exists():
        return [f"no fixture {f}"]
    want = {k: v for k, v in json.loads(f.read_text()).items() if not k.startswith("_")}
    got, diffs = table["enums"], []
    for name in sorted(want.keys() | got.keys()):
        w, g = want.get(name, {}), got.get(name, {})
        if w.get("module") != g.get("module"):
            diffs.append(f"{name}: module {g.get('module')!r} != fixture {w.get('module')!r}")
        wv, gv = w.get("values", {}), g.get("values", {})
        keys = sorted(wv.keys() | gv.keys(), key=int)
        diffs += [f"{name}[{k}]: {gv.get(k)!r} != fixture {wv.get(k)!r}" for k in keys if wv.get(k) != gv.get(k)]
    return diffs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="verify committed files, write nothing")
    ap.add_argument("releases", nargs="*", default=RELEASES, help="default: all")
    args, bad = ap.parse_args(), 0
    for release in args.releases:  # one at a time: venvs are created sequentially
        table, path = generate(release), OUT / f"{release}.json"
        counts = " ".join(f"{k}={len(v['values'])}" for k, v in table["enums"].items())
        if args.check:
            ok = path.exists() and path.read_text() == dump(table)
            bad += not ok
            print(f"{release}: {'ok' if ok else 'MISMATCH'} ({counts})")
            continue
        path.write_text(dump(table))
        diffs = fixture_diff(table)
        bad += bool(diffs)
        print(f"wrote {path.relative_to(REPO)} ({counts}); fixture: {f'{len(diffs)} diffs' if diffs else 'match'}")
        for d in diffs:
            print("  " + d)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
