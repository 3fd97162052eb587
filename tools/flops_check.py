"""Check vizexport/tinygrad/flops.py against the REAL tinygrad 0.11.0 / 0.12.0 (their own Estimates and viewer).

Usage:
  python tools/flops_check.py                 # the fixture pickles of 0.11.0 and 0.12.0, and runs made earlier
  python tools/flops_check.py --make          # (re)make runs of tools/flops_workload.py (CPU, PYTHON+tensor cores)
  python tools/flops_check.py --runs DIR      # where runs are (default /tmp/flops_runs)

Two comparisons per pickle set, real side computed by this same file run with --child in the release's venv
(tools/tgvenv.py):
1. per codegen context whose TracingKey.ret is a ProgramSpec: ProgramSpec.estimates (ops, lds, mem) from tinygrad vs
   flops.program_estimates on the stand-in; symbolic ones evaluated with sym_infer at every combination of each
   variable's min / max / middle, and at the var_vals of the profile's exec events;
2. per kernel range of the profile: the numbers and text the release's own viz.serve puts on it (0.11 "info",
   0.12 fmt lines) vs the same computed here from stand-ins with the viewer's linking rules (kernel name → last
   context with that key; 0.12: the latest exec event on that device whose name is the ProgramSpec's name).
Prints one line per kernel and a summary with the largest relative error; exits 1 on any mismatch.
"""
import argparse
import itertools
import json
import os
import pickle
import subprocess
import sys
import tempfile
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path("/work/shared/fixtures/tinygrad")
RELEASES = ("0.11.0", "0.12.0")
EST = ("ops", "lds", "mem")
RUNS = (("cpu", {"CPU": "1"}), ("python-tc", {"PYTHON": "1", "EMULATE_METAL": "1", "EMULATE": "METAL"}))  # 0.11, 0.12


# ---- child side: runs inside a tinygrad venv, may import tinygrad ----

def var_sets(variables: list, exec_vals: list[dict]) -> list[dict]:
    """name → value assignments to evaluate a symbolic estimate at: min/mid/max of each variable, and the launches'."""
    choices = [sorted({v.arg[1], (v.arg[1] + v.arg[2]) // 2, v.arg[2]}) for v in variables]
    names = [v.arg[0] for v in variables]
    sets = [dict(zip(names, combo, strict=True)) for combo in itertools.islice(itertools.product(*choices), 27)]
    return sets + [{n: ev[n] for n in names if n in ev} for ev in exec_vals if all(n in ev for n in names)]


def child(rewrites: str, profile: str, out: str) -> None:
    from tinygrad.renderer import ProgramSpec
    from tinygrad.uop.ops import Ops, UOp, sym_infer
    from tinygrad.viz import serve
    with open(rewrites, "rb") as f:
        trace = pickle.load(f)
    events = []
    if profile != "-":
        with open(profile, "rb") as f:
            events = pickle.load(f)
    v11 = isinstance(trace, tuple)
    keys = trace[0] if v11 else trace.keys
    exec_vals = [e.arg["var_vals"] for e in events if type(e).__name__ == "ProfilePointEvent" and e.name == "exec"]
    specs = []
    for i, k in enumerate(keys):
        if not isinstance(p := k.ret, ProgramSpec):
            continue
        est, row = p.estimates, {"i": i, "name": k.keys[0], "symbolic": {}, "at": []}
        for field in EST:
            x = getattr(est, field)
            row[field] = x if isinstance(x, int) else None
            if isinstance(x, UOp):
                row["symbolic"][field] = x.render()
        # the variables of the estimates (a launch size may use one the kernel's uops do not define)
        variables = {x.arg[0]: x for f in EST if isinstance(y := getattr(est, f), UOp) for x in y.toposort()
                     if x.op is Ops.DEFINE_VAR}
        for vals in var_sets(list(variables.values()), exec_vals) if row["symbolic"] else []:
            arg = {v: vals[n] for n, v in variables.items()} if v11 else vals  # 0.11's sym_infer: {Variable: int}
            row["at"].append([vals, [int(sym_infer(getattr(est, f), arg)) for f in EST]])
        specs.append(row)
    ranges = viewer_ranges(serve, trace, events, v11) if events else []
    with open(out, "w") as f:
        json.dump({"specs": specs, "ranges": ranges}, f)


def viewer_ranges(serve, trace, events: list, v11: bool) -> list:
    """[device, raw name, int st µs, dur µs, text, [ops, mem, lds] the viewer used] per drawn range event, captured
    from the release's own timeline_layout."""
    rows: list = []
    layout, infer = serve.timeline_layout, getattr(serve, "sym_infer", None)
    used: list = []

    def capture(x, var_vals):
        used.append(ret := infer(x, var_vals))
        return ret

    def wrapped(dev_events, *a, **k):
        drawn = [(e, st, dur) for st, _, dur, e in dev_events if dur != 0]
        used.clear()
        ret = layout(dev_events, *a, **k)
        if v11:
            texts = [s["info"] for s in ret["shapes"]]
        else:  # 0.12 bytepack: <BI> header, then <IIIIfI> per event, fmt = string id (scache: str → id)
            import struct
            names = {i: s for s, i in a[1].items()}
            texts = [names[t[5]] for t in struct.iter_unpack("<IIIIfI", ret[5:])] if ret else []
        nums = iter(used)
        for (e, st, dur), text in zip(drawn, texts, strict=True):
            name = e.name if isinstance(e.name, str) else e.name.display_name
            if not text:
                figures = None
            elif v11:
                est = trace[0][serve.ref_map[e.name]].ret.estimates
                figures = [est.ops, est.mem, est.lds]
            else:
                figures = [next(nums) for _ in range(3)]
            rows.append([e.device, name, st, dur, text or None, figures])
        return ret

    serve.timeline_layout, serve.sym_infer = wrapped, capture
    if v11:
        serve.contexts = trace
        serve.ctxs = serve.get_metadata(*trace[:2])
    else:
        serve.trace = trace
        serve.ctxs = serve.get_rewrites(trace)
    serve.get_profile(events)
    return rows


# ---- parent side: vizexport only ----

def ours_ranges(events: list, keys: list, release: str) -> list:
    """The same rows as viewer_ranges, from stand-ins: the viewer's order, linking and formatting."""
    from vizexport.pickles import class_name
    from vizexport.tinygrad.flops import program_estimates, program_specs
    specs = program_specs(keys)
    diffs: dict = {}
    for e in events:
        if class_name(e) == "ProfileDeviceEvent":
            d = e.__dict__
            copy = d["copy_tdiff"] if d.get("copy_tdiff") is not None else d["comp_tdiff"]
            diffs[d["device"]] = (Decimal(d["comp_tdiff"]), Decimal(copy))
    per_dev: dict = {}
    for e in events:  # flatten_events: ranges shifted by their device's offset, points as they are
        d = e.__dict__
        if class_name(e) == "ProfileRangeEvent":
            diff = diffs.get(d["device"], (Decimal(0), Decimal(0)))[bool(d.get("is_copy"))]
            st = Decimal(d["st"]) + diff
            en = (Decimal(d["en"]) if d["en"] is not None else Decimal(d["st"])) + diff
            per_dev.setdefault(d["device"], []).append((int(st), float(en - st), e))
        elif class_name(e) == "ProfilePointEvent":
            per_dev.setdefault(d["device"], []).append((int(Decimal(d["ts"])), 0.0, e))
    rows = []
    for dev, evs in per_dev.items():
        evs.sort(key=lambda x: x[0])
        execs: dict = {}
        for st, dur, e in evs:
            d = e.__dict__
            if class_name(e) == "ProfilePointEvent" and d["name"] == "exec":
                execs[d["arg"]["name"]] = d["arg"]
            if dur == 0:
                continue
            name = d["name"] if isinstance(d["name"], str) else d["name"].__dict__["display_name"]
            text, figures = None, None
            spec = specs.get(d["name"]) if isinstance(d["name"], str) else None
            est = program_estimates(spec, release) if spec is not None else None
            if est is not None and release == "0.11.0" and (vals := est.values()) is not None:
                ops, lds, mem = vals
                t = dur * 1e3
                text, figures = f"{ops / t:.2f} GFLOPS {mem / t:4.1f}|{lds / t:.1f} GB/s", [ops, mem, lds]
            elif est is not None and release == "0.12.0" and (ex := execs.get(spec.__dict__["name"])) is not None:
                vals = est.values(ex["var_vals"])
                if vals is None:
                    text = "ERROR: estimates do not evaluate"
                else:
                    ops, lds, mem = vals
                    text, figures = fmt12(ops, mem, lds, dur, ex), [ops, mem, lds]
            rows.append([dev, name, st, dur, text, figures])
    return rows


def fmt12(ops: int, mem: int, lds: int, dur: float, ex: dict) -> str:
    """0.12.0 viz/serve.py:167-173."""
    t = dur * 1e-6
    flops, membw, ldsbw = ops / t, mem / t, lds / t
    fmt = [f"{flops * 1e-9:.0f} GFLOPS" if flops < 1e14 else f"{flops * 1e-12:.0f} TFLOPS",
           (f"{membw * 1e-9:.0f} GB/s" if membw < 1e13 else f"{membw * 1e-12:.0f} TB/s") + " mem",
           (f"{ldsbw * 1e-9:.0f} GB/s" if ldsbw < 1e15 else f"{ldsbw * 1e-12:.0f} TB/s") + " lds"]
    meta = ",".join(metadata_text(m) for m in (ex.get("metadata") or ()))
    return "\n".join([*fmt, meta] if meta else fmt)


def metadata_text(m) -> str:
    """str(Metadata) in 0.12 (helpers.py:212)."""
    d = m.__dict__
    return d["name"] + (" bw" if d.get("backward") else "")


def rel(a, b) -> float:
    return 0.0 if a == b else abs(a - b) / max(abs(a), abs(b))


def check(release: str, folder: Path, python: str) -> tuple[int, int, float]:
    """Compare one pickle set; returns (items compared, mismatches, max relative error)."""
    from vizexport.pickles import load
    from vizexport.tinygrad.flops import Sym, program_estimates
    rewrites, profile = folder / "rewrites.pkl", folder / "profile.pkl"
    with tempfile.NamedTemporaryFile(suffix=".json") as tmp:
        subprocess.run(["nice", python, __file__, "--child", str(rewrites),
                        str(profile) if profile.exists() else "-", tmp.name], check=True)
        real = json.loads(Path(tmp.name).read_text())
    top, _ = load(rewrites)
    keys = top[0] if isinstance(top, tuple) else top.__dict__["keys"]
    n = bad = 0
    worst = 0.0
    print(f"== {release} {folder}")
    print(f"   {'kernel':<22} {'real ops/lds/mem':<34} {'ours':<34}")
    for row in real["specs"]:
        est = program_estimates(keys[row["i"]].__dict__["ret"], release)
        n += 1
        if est is None:
            bad += 1
            print(f"   {row['name']:<22} ours: None  MISMATCH")
            continue
        real_t = [row[f] if f not in row["symbolic"] else "sym" for f in EST]
        ours_t = [getattr(est, f) if not isinstance(getattr(est, f), Sym) else "sym" for f in EST]
        ok = real_t == ours_t
        for vals, want in row["at"]:
            got = [est.ops, est.lds, est.mem]
            got = [g if isinstance(g, int) else g(vals) for g in got]
            ok &= got == want
            worst = max([worst, *(rel(a, b) for a, b in zip(want, got, strict=True) if b is not None)])
        worst = max([worst, *(rel(a, b) for a, b in zip(real_t, ours_t, strict=True) if isinstance(a, int)
                              and isinstance(b, int))])
        bad += not ok
        at = f"  + {len(row['at'])} var_vals {row['at'][0][1]}..." if row["at"] else ""
        print(f"   {row['name']:<22} {'/'.join(map(str, real_t)):<34} {'/'.join(map(str, ours_t)):<34}"
              f"{'ok' if ok else 'MISMATCH'}{at}")
    if real["ranges"]:
        evs, _ = load(profile)
        ours = ours_ranges(evs, keys, release)
        mine = {(r[0], r[1], r[2]): r for r in ours}
        print(f"   viewer: {'device':<6} {'kernel':<16} {'dur µs':>8}  real text | ours")
        for dev, name, st, dur, text, figures in real["ranges"]:
            o = mine.get((dev, name, st))
            if text is None and (o is None or o[4] is None):
                continue  # not a kernel with figures on either side
            n += 1
            ok = o is not None and o[4] == text and o[5] == figures
            bad += not ok
            if o is not None and figures and o[5]:
                worst = max([worst, *(rel(a, b) for a, b in zip(figures, o[5], strict=True))])
            shown = (text or "-").replace("\n", " / ")
            print(f"           {dev:<6} {name[:16]:<16} {dur:8.3f}  {shown} | "
                  f"{'same' if ok else (o[4] if o else 'missing')}")
    return n, bad, worst


def make_runs(runs: Path) -> list[tuple[str, Path]]:
    """Run tools/flops_workload.py with each release (one job at a time), in the env its pickles need."""
    from tgvenv import venv_python
    out = []
    for release in RELEASES:
        for name, env in RUNS:
            d = runs / release / name
            (d / "tmp").mkdir(parents=True, exist_ok=True)
            viz = {"VIZ": "1", "PROFILE": "1", "NO_EXECV": "1"} if release == "0.11.0" else {"VIZ": "-1"}
            full = {**os.environ, **env, **viz, "TMPDIR": str(d / "tmp"), "CACHEDB": str(d / "cache.db"),
                    "USERNAME": "root", "WORKLOAD": name, "PRINT_MATCH_STATS": "0"}
            subprocess.run(["nice", venv_python(release), str(ROOT / "tools" / "flops_workload.py")], env=full,
                           check=True, cwd=d)
            for f in ("rewrites.pkl", "profile.pkl"):
                src = d / "tmp" / f"{f}.root"
                if src.exists():
                    src.replace(d / f)
            out.append((release, d))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--make", action="store_true")
    ap.add_argument("--runs", type=Path, default=Path("/tmp/flops_runs"))
    args = ap.parse_args()
    sys.path[:0] = [str(ROOT), str(ROOT / "tools")]
    from tgvenv import venv_python
    sets = [(r, FIXTURES / r) for r in RELEASES]
    if args.make:
        sets += make_runs(args.runs)
    else:  # runs made earlier
        sets += [(d.parent.name, d) for d in sorted(args.runs.glob("*/*")) if (d / "rewrites.pkl").exists()]
    total = bad = 0
    worst = 0.0
    for release, folder in sets:
        n, b, w = check(release, folder, venv_python(release))
        total, bad, worst = total + n, bad + b, max(worst, w)
    print(f"compared {total}, mismatches {bad}, max relative error {worst:g}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(*sys.argv[2:5])
    else:
        main()
