"""Make many real runs of the same workloads, for the regression verdicts of `diff` and `history` (issue #35).

Usage: python tools/make_runs.py [--out /tmp/runs] [--runs 16] [--devices NULL,CPU] [--workloads W,..]
       python tools/make_runs.py --export SET --first A --last B OUT.json.gz

Each workload runs `--runs` times per device with tinygrad 0.14.0 and VIZ=-1 (as tools/make_corpus.py runs them:
a scrubbed environment, one run at a time, under `nice`), and every run's pickles are kept as
OUT/<workload>-<device>/<NN>/{profile,rewrites}.pkl with run.json (seconds, exit code, when). Runs already made are
kept, so a second call adds the missing ones. The pickles are big: keep them out of the repository.
--export writes what `vizexport history add` keeps of runs A..B of a set (per kernel and device its launch
durations, programs and pattern; device totals) as gzip'd JSON: a few kB a run, the tests' history of real runs.
"""
import argparse
import gzip
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from make_corpus import NICE, PICKLES, STEP_TAG, USER, WORKLOADS_DIR, base_env, find_pickle, run
from tgvenv import venv_python

TOOLS = Path(__file__).resolve().parent
RELEASE = "0.14.0"
# name -> (program, devices it runs on, extra env); the corpus workloads take their device from CORPUS_DEVICE,
# the others from DEV (sample_workload names NULL itself). 0.14.0's CPU device times its kernels only on the HCQ2
# path (HCQ2=1: each batch as a ProfileGraphEvent); without it a CPU profile holds no launches.
DEVICE_ENV = {"CPU": {"HCQ2": "1"}}
WORKLOADS = {
    "train": (WORKLOADS_DIR / "train.py", ("NULL", "CPU"), {}),
    "multi": (WORKLOADS_DIR / "multi.py", ("NULL", "CPU"), {}),
    "sym": (WORKLOADS_DIR / "sym.py", ("NULL", "CPU"), {}),
    "sample": (TOOLS / "sample_workload.py", ("NULL",), {}),
    "mlp": (TOOLS / "mlp_workload.py", ("NULL", "CPU"), {}),
    "cnn": (TOOLS / "training_workload.py", ("NULL", "CPU"), {}),
}


def make_run(py: str, workload: str, device: str, dst: Path) -> dict:
    program, _, extra = WORKLOADS[workload]
    env = {"VIZ": "-1", "DEV": device, "CORPUS_DEVICE": device, **DEVICE_ENV.get(device, {}), **extra}
    with tempfile.TemporaryDirectory(prefix="runs-") as t:
        tmp = Path(t)
        rc, stdout, stderr, secs = run([py, str(program)], {**base_env(tmp), **env}, WORKLOADS_DIR)
        meta = {"workload": workload, "device": device, "env": env, "exit_code": rc, "seconds": secs,
                "finished": time.strftime("%Y-%m-%dT%H:%M:%S"), "nice": NICE, "user": USER,
                "failed_steps": [line for line in stdout.splitlines() if line.startswith(STEP_TAG) and
                                 '"ok": false' in line]}
        if rc:
            meta["stderr_tail"] = stderr.strip()[-600:]
        dst.mkdir(parents=True, exist_ok=True)
        for k in PICKLES:
            p = find_pickle(tmp, k)
            if p is not None:
                shutil.copyfile(p, dst / f"{k}.pkl")
    (dst / "run.json").write_text(json.dumps(meta, indent=1) + "\n")
    return meta


def export(folder: Path, first: int, last: int, dst: Path) -> None:
    sys.path.insert(0, str(TOOLS.parent))
    import vizexport
    from vizexport.history.records import RunMeta, run_record
    runs = []
    for i in range(first, last + 1):
        prof = vizexport.load_profile(folder / f"{i:02d}" / "profile.pkl")
        meta = RunMeta(f"run{i:02d}", "main", "", {}, "profile.pkl", prof.release.name, 0, 0, 0)
        r = run_record(vizexport.build_timeline(prof), meta)
        runs.append({"run": i, "span_ns": meta.span_ns, "kernels": [
            {"device": k.device, "name": k.name, "category": k.category, "programs": k.programs,
             "durations": k.durations.tolist(), "pattern": k.pattern.tolist()} for k in r.kernels],
            "devices": [[d.device, d.launches, d.total_ns, d.busy_ns] for d in r.devices]})
    dst.write_bytes(gzip.compress(json.dumps({"set": folder.name, "runs": runs}).encode(), mtime=0))
    print(f"wrote {dst}: {len(runs)} runs of {folder.name}, {dst.stat().st_size:,} bytes")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("/tmp/runs"))
    ap.add_argument("--runs", type=int, default=16)
    ap.add_argument("--devices", default="NULL,CPU")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--export", metavar="SET", help="export runs of OUT/SET (e.g. train-null) instead")
    ap.add_argument("--first", type=int, default=0)
    ap.add_argument("--last", type=int, default=11)
    ap.add_argument("dst", nargs="?", type=Path, help="the --export file")
    a = ap.parse_args()
    if a.export:
        export(a.out / a.export, a.first, a.last, a.dst)
        return
    py = venv_python(RELEASE)
    devices = a.devices.split(",")
    for i in range(a.runs):  # round-robin: each set's runs spread over the same hours, as CI runs would
        for workload in a.workloads.split(","):
            for device in (d for d in WORKLOADS[workload][1] if d in devices):
                dst = a.out / f"{workload}-{device.lower()}" / f"{i:02d}"
                if (dst / "run.json").exists() and (dst / "profile.pkl").exists():
                    continue
                m = make_run(py, workload, device, dst)
                print(f"{dst}: exit {m['exit_code']}, {m['seconds']} s, {len(m['failed_steps'])} failed steps",
                      flush=True)


if __name__ == "__main__":
    main()
