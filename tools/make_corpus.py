"""Make the issue #15 corpus: new workloads run with every release that writes profiles, each set stored with the
figures THAT release's own viewer shows for it.

Usage: python tools/make_corpus.py [--out DIR] [--releases R,..] [--devices CPU,NULL] [--workloads W,..]
                                   [--tinygrad-src PATH] [--all] [--refigure]
  By default only the sets of the committed corpus are made (see `committed`); --all makes all 40.
  master is installed from a tinygrad source tree: --tinygrad-src or $TINYGRAD_SRC (a checkout of MASTER_COMMIT);
  without either, expected_figures.venv_for extracts MASTER_COMMIT from the local mirror (git archive).
  CPU sets need `clang` on PATH (Debian: apt-get install clang); without it they are skipped and recorded so.

Per set `<release>-<device>-<workload>` in DIR (default tests/data/corpus): profile.pkl.gz and rewrites.pkl.gz (the
release's pickles, gzip'd, mtime 0), figures.json.gz (tools/corpus/viewer_figures.py, run in the release's venv)
and set.json (command, env, each workload step ok/failed, seconds, sizes). DIR/index.json lists every set.
Workloads are tools/corpus/*.py; venvs come from tools/tgvenv.py. One set runs at a time, under `nice`.
--refigure recomputes only figures.json.gz of the stored sets, from their stored pickles.
"""
import argparse
import gzip
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from expected_figures import MASTER_COMMIT, venv_for
from make_sample import ensure_venv

TOOLS = Path(__file__).resolve().parent
ROOT = TOOLS.parent
WORKLOADS_DIR = TOOLS / "corpus"
OUT = ROOT / "tests" / "data" / "corpus"
RELEASES = ["0.11.0", "0.12.0", "0.13.0", "0.14.0", "master"]
DEVICES = ["CPU", "NULL"]
USER = "corpus"  # pickles are written as <name>.pkl.<user>
NICE = ["nice", "-n", "10"]
RUN_TIMEOUT = 1200  # seconds, per workload run and per figures run
STEP_TAG = "[corpus-step]"
# env cleared before every run, so the caller's settings cannot leak into a set
SCRUB = ("VIZ", "PROFILE", "DEBUG", "DEV", "TRACK_MATCH_STATS", "TRACEMETA", "DEBUG_GC", "HCQ2", "JIT", "BEAM",
         "SQTT", "PYTHONPATH", "CPU", "NULL", "CLANG", "LLVM", "CPU_LLVM", "NOOPT", "PRINT_MATCH_STATS")
# how each release saves pickles without starting its viewer (tinygrad-formats.md §2.1): 0.11 needs VIZ=1 and
# PROFILE=1 with SQTT=1 (skips the profile-side server exec) and the workload neutralizes os.execv; 0.12+ VIZ=-1
RELEASE_ENV = {"0.11.0": {"VIZ": "1", "PROFILE": "1", "SQTT": "1", "PRINT_MATCH_STATS": "0", "CORPUS_NO_EXECV": "1"}}
DEFAULT_RELEASE_ENV = {"VIZ": "-1"}
# workload name -> (program in tools/corpus, extra env)
WORKLOADS = {
    "sym": ("sym.py", {}),
    "train": ("train.py", {}),
    "multi": ("multi.py", {}),
    "meta": ("multi.py", {"DEBUG_GC": "1", "TRACEMETA": "2"}),
}
PICKLES = ("profile", "rewrites")
TRAIN_KEPT = ("0.12.0", "master")  # training sets (~0.6 MB each) kept in the committed corpus


def committed(release: str, device: str, workload: str) -> bool:
    """Whether a set belongs to the committed corpus (a few MB): every release and device for sym and multi, the
    DEBUG_GC/TRACEMETA=2 variant on NULL, training on NULL for TRAIN_KEPT only. --all makes every set."""
    if workload == "meta":
        return device == "NULL"
    if workload == "train":
        return device == "NULL" and release in TRAIN_KEPT
    return True


def release_python(release: str, src: str | None) -> str:
    """The venv python of a release (master from `src` or, without it, from the mirror via expected_figures)."""
    if release == "master" and src:
        os.environ["TINYGRAD_SRC"] = src
        return ensure_venv(release)
    return venv_for(release)


def base_env(tmp: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in SCRUB}
    env.update(TMPDIR=str(tmp), CACHEDB=str(tmp / "cache.db"), USER=USER, LOGNAME=USER, LNAME=USER, USERNAME=USER,
               PYTHONPATH="")
    return env


def set_env(release: str, device: str, workload: str) -> dict:
    """The variables that define a set (recorded in set.json)."""
    return {**RELEASE_ENV.get(release, DEFAULT_RELEASE_ENV), "DEV": device, "CORPUS_DEVICE": device,
            **WORKLOADS[workload][1]}


def run(cmd: list, env: dict, cwd: Path) -> tuple[int, str, str, float]:
    t0 = time.monotonic()
    try:
        p = subprocess.run(NICE + cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=RUN_TIMEOUT,
                           check=False)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc, out, err = -1, str(e.stdout or ""), f"timed out after {RUN_TIMEOUT} s"
    return rc, out, err, round(time.monotonic() - t0, 2)


def find_pickle(tmp: Path, name: str) -> Path | None:
    """$TMPDIR/<name>.pkl.<user>, or whatever <name>.pkl* the release wrote (naming varies)."""
    exact = tmp / f"{name}.pkl.{USER}"
    return exact if exact.exists() else next(iter(sorted(tmp.glob(f"{name}.pkl*"))), None)


def gzip_to(src: Path, dst: Path) -> int:
    with open(src, "rb") as f, open(dst, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0,
                                                                      compresslevel=9) as gz:
        shutil.copyfileobj(f, gz)
    return dst.stat().st_size


def store_figures(py: str, dst: Path, tmp: Path, found: dict, meta: dict) -> None:
    """Run viewer_figures.py on the set's pickles with the release's python; store figures.json.gz in dst."""
    fig = tmp / "figures.json"
    args = [str(found[k]) if found.get(k) else "-" for k in PICKLES]
    rc, _, stderr, secs = run([py, str(WORKLOADS_DIR / "viewer_figures.py"), *args, str(fig)], base_env(tmp), tmp)
    meta["figures_seconds"] = secs  # base_env has no VIZ: the viewer code must not trace itself
    meta.pop("figures_error", None)
    if rc or not fig.exists():
        meta["figures_error"] = stderr.strip()[-600:]
        return
    meta["sizes"]["figures.json"] = fig.stat().st_size
    meta["sizes"]["figures.json.gz"] = gzip_to(fig, dst / "figures.json.gz")


def make_set(py: str, release: str, device: str, workload: str, out: Path) -> dict:
    """Run one workload with one release, store its pickles and its viewer figures; return set.json's content."""
    name = f"{release}-{device.lower()}-{workload}"
    program = WORKLOADS_DIR / WORKLOADS[workload][0]
    tinygrad = f"master@{MASTER_COMMIT}" if release == "master" else release
    meta: dict = {"set": name, "release": release, "tinygrad": tinygrad, "device": device, "workload": workload,
                  "program": str(program.relative_to(ROOT)), "env": set_env(release, device, workload)}
    dst = out / name
    shutil.rmtree(dst, ignore_errors=True)
    dst.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="corpus-") as t:
        tmp = Path(t)
        rc, stdout, stderr, secs = run([py, str(program)], {**base_env(tmp), **meta["env"]}, tmp)
        steps = [json.loads(line[len(STEP_TAG):]) for line in stdout.splitlines() if line.startswith(STEP_TAG)]
        meta.update(exit_code=rc, workload_seconds=secs, steps=steps,
                    failed_steps=[f"{s['step']}: {s['error']}" for s in steps if not s["ok"]])
        if rc:
            meta["stderr_tail"] = stderr.strip()[-600:]
        found = {k: find_pickle(tmp, k) for k in PICKLES}
        meta["sizes"] = {}
        for k, p in found.items():
            if p is not None:
                meta["sizes"][f"{k}.pkl"] = p.stat().st_size
                meta["sizes"][f"{k}.pkl.gz"] = gzip_to(p, dst / f"{k}.pkl.gz")
        if found["profile"] is None and found["rewrites"] is None:
            meta["figures_error"] = "no pickles written"
        else:
            store_figures(py, dst, tmp, found, meta)
    (dst / "set.json").write_text(json.dumps(meta, indent=1) + "\n")
    return meta


def refigure_set(py: str, dst: Path) -> dict:
    """Recompute a stored set's figures from its stored pickles (after a change to viewer_figures.py)."""
    meta = json.loads((dst / "set.json").read_text())
    with tempfile.TemporaryDirectory(prefix="corpus-") as t:
        tmp, found = Path(t), {}
        for k in PICKLES:
            if (dst / f"{k}.pkl.gz").exists():
                found[k] = tmp / f"{k}.pkl"
                with gzip.open(dst / f"{k}.pkl.gz") as src, open(found[k], "wb") as f:
                    shutil.copyfileobj(src, f)
        store_figures(py, dst, tmp, found, meta)
    (dst / "set.json").write_text(json.dumps(meta, indent=1) + "\n")
    return meta


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--releases", default=",".join(RELEASES))
    ap.add_argument("--devices", default=",".join(DEVICES))
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--tinygrad-src", default=os.environ.get("TINYGRAD_SRC"), help="tinygrad checkout for master")
    ap.add_argument("--refigure", action="store_true", help="only recompute figures of the stored sets")
    ap.add_argument("--all", action="store_true", help="every release x device x workload, not just the committed")
    return ap.parse_args()


def summary_line(m: dict) -> str:
    s = m.get("sizes", {})
    stored = ("profile.pkl.gz", "rewrites.pkl.gz", "figures.json.gz")
    kb = "  ".join(f"{k}={s[k] / 1000:.0f}k" for k in stored if k in s)
    note = m.get("skipped") or m.get("figures_error", "")[:60] or f"{len(m.get('failed_steps', []))} steps failed"
    return f"{m['set']:24} {m.get('workload_seconds', 0):6.1f}s {m.get('figures_seconds', 0):6.1f}s  {kb}  {note}"


def main() -> None:
    a = parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    index_path = a.out / "index.json"
    index = json.loads(index_path.read_text()) if index_path.exists() else {}
    t0 = time.monotonic()
    for release in a.releases.split(","):
        py = release_python(release, a.tinygrad_src)
        for device in a.devices.split(","):
            for workload in a.workloads.split(","):
                name = f"{release}-{device.lower()}-{workload}"
                if not (a.all or committed(release, device, workload)):
                    continue
                if a.refigure:
                    if not (a.out / name / "set.json").exists():
                        continue
                    meta = refigure_set(py, a.out / name)
                elif device == "CPU" and not shutil.which("clang"):
                    meta = {"set": name, "skipped": "no clang on PATH (tinygrad's CPU device compiles with it)"}
                else:
                    meta = make_set(py, release, device, workload, a.out)
                index[name] = {k: meta.get(k) for k in ("tinygrad", "device", "workload", "env", "failed_steps",
                                                        "sizes", "skipped", "figures_error") if meta.get(k)}
                print(summary_line(meta), flush=True)
    index_path.write_text(json.dumps(dict(sorted(index.items())), indent=1) + "\n")
    total = sum(v for m in index.values() for k, v in m.get("sizes", {}).items() if k.endswith(".gz"))
    print(f"{len(index)} sets in {a.out}, {total / 1e6:.2f} MB stored, {time.monotonic() - t0:.0f} s")


if __name__ == "__main__":
    main()
