"""Compare every corpus set (tools/make_corpus.py) as the CURRENT vizexport reads it with what the release's own viewer
showed (figures.json.gz), and print a table: set x figure class -> differences/compared, then example differences.

Usage: /work/main/.venv/bin/python tools/compare_corpus.py [--corpus DIR] [--sets REGEX] [--examples N] [--json OUT]

Figure classes (tolerances): events = events per track (the viewer draws ranges with duration > 0 only); start = an
event's start within ±1 µs (the viewer truncates to whole µs) — a viewer event without a vizexport event that close
counts here; name = names (ANSI colour codes removed on both sides); dur = durations within 0.002 µs or 1e-6;
est = FLOPS, B/s mem, B/s lds of kernels within 0.2 % (vizexport rounds its G-units to 3 decimals: ±5e5 too);
copy = copies' B/s (0.2 %) and B; mem = memory peak per device; marker = markers (name, start ±1 µs); ctx = context
names, their rewrite counts and rewrite names; op = op name of every UOp the viewer draws; dtype = its dtype text
(vizexport shows the release's own repr without the "dtypes." prefix: dtypes.float.vec(4) -> float.vec(4)).
vizexport_figures() is the only code that knows vizexport's API.
"""
import argparse
import gzip
import json
import math
import re
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "data" / "corpus"
CLASSES = ("events", "start", "name", "dur", "est", "copy", "mem", "marker", "ctx", "op", "dtype", "uops")
START_TOL_US = 1.0
DUR_TOL_US, DUR_TOL_REL = 0.002, 1e-6
RATE_TOL_REL, RATE_TOL_ABS = 0.002, 5e5  # 0.2 %; vizexport's G-units have 3 decimals
EST_KEYS = ("FLOPS", "B/s mem", "B/s lds")
COPY_KEYS = ("B/s", "B")
ANSI = re.compile(r"\x1b\[[0-9;]*m")
# vizexport slice arg -> (viewer figure, factor to the viewer's unit)
ARG_UNITS = {"GFLOPS": ("FLOPS", 1e9), "GB/s mem": ("B/s mem", 1e9), "GB/s lds": ("B/s lds", 1e9),
             "GB/s": ("B/s", 1e9), "bytes": ("B", 1)}


# ---- the vizexport side (adapt here when its API changes) ----

def vizexport_figures(profile: Path | None, rewrites: Path | None) -> dict:
    """The compared figures as the current vizexport reads the set, in the viewer figures' layout: profile.tracks
    {track: [[name, start µs (absolute), dur µs, nums]]}, memory_peaks, markers [[name, µs]]; rewrites.contexts
    [[name, [rewrite names]]], uops {id: (op, dtype)}, uop_lists {ctx index: the final program's UOp list}."""
    import vizexport
    from vizexport.timeline import Role
    from vizexport.tinygrad.timeline import build_timeline
    out: dict = {}
    log = vizexport.load_rewrites(str(rewrites)) if rewrites else None
    if profile:
        tl = build_timeline(vizexport.load_profile(str(profile)), log)
        tracks: dict = {}
        peaks, markers = {}, []
        for t in tl.tracks:
            if t.kind == "counter" and t.name.endswith(" Memory"):
                peaks[t.name.removesuffix(" Memory")] = max(t.values, default=0)
            if t.kind != "slice" or t.role is Role.BUFFERS:  # the viewer draws buffers inside its Memory track
                continue
            rows = [[tl.strings[t.names[i]], t.ts[i] / 1e3, t.dur[i] / 1e3, t.args.get(i, {})]
                    for i in range(len(t.ts))]
            if t.name == "Markers" and t.parent == 0:
                markers += [[r[0], r[1]] for r in rows]
                continue
            tracks.setdefault(t.name, []).extend(
                [name, ts, dur, {ARG_UNITS[k][0]: v * ARG_UNITS[k][1] for k, v in args.items() if k in ARG_UNITS}]
                for name, ts, dur, args in rows if dur > 0)  # instants (-1) and zero-length: the viewer draws none
        out["profile"] = {"tracks": tracks, "memory_peaks": peaks, "markers": markers}
    if log is not None:
        out["rewrites"] = {"contexts": [[c.key.name, [r.name for r in c.rewrites]] for c in log.contexts],
                           "uops": {i: (u.op_name, u.dtype) for i, u in log.uops.items()},
                           "uop_lists": {str(i): c.program for i, c in enumerate(log.contexts) if c.program}}
    return out


# ---- comparison ----

class Tally:
    """Per figure class: how many figures were compared, how many differ, and the first examples."""

    def __init__(self, examples: int) -> None:
        self.n = dict.fromkeys(CLASSES, 0)
        self.d = dict.fromkeys(CLASSES, 0)
        self.ex: dict[str, list[str]] = {c: [] for c in CLASSES}
        self.max_examples = examples

    def check(self, cls: str, ok: bool, what=None) -> None:
        self.n[cls] += 1
        if not ok:
            self.d[cls] += 1
            if len(self.ex[cls]) < self.max_examples:
                self.ex[cls].append(what() if callable(what) else str(what))


def plain(s) -> str:
    return ANSI.sub("", s) if isinstance(s, str) else repr(s)


def close(a: float, b: float) -> bool:
    return abs(a - b) <= max(RATE_TOL_REL * max(abs(a), abs(b)), RATE_TOL_ABS)


def match_events(view: list, mine: list, start_us: int) -> tuple[list, list, list]:
    """Pair each viewer event with an unused vizexport event starting within the tolerance (truncation puts the
    exact start in [st, st+1)), preferring the same name, then the closest duration."""
    buckets: dict[int, list[int]] = {}
    for j, e in enumerate(mine):
        buckets.setdefault(math.floor(e[1] - start_us), []).append(j)
    used, pairs, missing = set(), [], []
    for v in view:
        cands = [j for b in range(v[1] - 1, v[1] + 2) for j in buckets.get(b, ())
                 if j not in used and -START_TOL_US <= mine[j][1] - start_us - v[1] < 1 + START_TOL_US]
        if not cands:
            missing.append(v)
            continue
        j = min(cands, key=lambda j: (plain(mine[j][0]) != plain(v[0]), abs(mine[j][2] - v[2])))
        used.add(j)
        pairs.append((v, mine[j]))
    return pairs, missing, [e for j, e in enumerate(mine) if j not in used]


def compare_event(t: Tally, track: str, v: list, x: list) -> None:
    where = f"{track} @{v[1]}us"
    t.check("name", plain(v[0]) == plain(x[0]), lambda: f"{where}: viewer {plain(v[0])!r} vizexport {plain(x[0])!r}")
    t.check("dur", abs(v[2] - x[2]) <= max(DUR_TOL_US, DUR_TOL_REL * v[2]),
            lambda: f"{where} {plain(v[0])}: viewer {v[2]:.3f}us vizexport {x[2]:.3f}us")
    vn, xn = v[3] or {}, x[3] or {}
    for cls, keys in (("est", EST_KEYS), ("copy", COPY_KEYS)):
        for k in keys:
            if k in vn and vn[k] != "ERR":
                ok = k in xn and (xn[k] == vn[k] if k == "B" else close(float(vn[k]), xn[k]))
                shown = f" (shown {vn['text']!r})" if "text" in vn else ""
                t.check(cls, ok, lambda k=k, shown=shown: f"{where} {plain(v[0])}: {k} viewer {vn[k]:.6g} "
                                                          f"vizexport {xn.get(k, 'none')!s:.8}{shown}")


def compare_profile(t: Tally, view: dict, mine: dict) -> None:
    start = view["start_us"]
    for track in sorted(set(view["tracks"]) | set(mine["tracks"])):
        vt, xt = view["tracks"].get(track, []), mine["tracks"].get(track, [])
        t.check("events", len(vt) == len(xt), f"{track}: viewer {len(vt)} events, vizexport {len(xt)}")
        pairs, missing, _ = match_events(vt, xt, start)
        for v in missing:
            t.check("start", False, f"{track}: viewer {plain(v[0])!r} @{v[1]}us dur {v[2]:.3f} has no vizexport "
                                    "event within 1us")
        for v, x in pairs:
            t.check("start", True)
            compare_event(t, track, v, x)
    for dev in sorted(set(view["memory_peaks"]) | set(mine["memory_peaks"])):
        a, b = view["memory_peaks"].get(dev), mine["memory_peaks"].get(dev)
        t.check("mem", a == b or (not a and not b), f"{dev}: viewer peak {a} vizexport {b}")
    vm, xm = sorted(view["markers"], key=lambda m: m[1]), sorted(mine["markers"], key=lambda m: m[1])
    t.check("marker", len(vm) == len(xm), f"viewer {len(vm)} markers, vizexport {len(xm)}")
    for a, b in zip(vm, xm, strict=False):
        ok = plain(a[0]) == plain(b[0]) and 0 - START_TOL_US <= b[1] - start - a[1] < 1 + START_TOL_US
        t.check("marker", ok, f"viewer {a[0]!r}@{a[1]}us vizexport {b[0]!r}@{b[1] - start:.1f}us")


def compare_rewrites(t: Tally, view: dict, mine: dict) -> None:
    vc, xc = view["contexts"], mine["contexts"]
    t.check("ctx", len(vc) == len(xc), f"viewer {len(vc)} contexts, vizexport {len(xc)}")
    for i, (a, b) in enumerate(zip(vc, xc, strict=False)):
        t.check("ctx", plain(a[0]) == plain(b[0]), f"ctx {i}: viewer {plain(a[0])!r} vizexport {plain(b[0])!r}")
        t.check("ctx", len(a[2]) == len(b[1]), f"ctx {i} {plain(a[0])}: viewer {len(a[2])} rewrites, vizexport "
                                               f"{len(b[1])} (viewer sidebar steps {a[1]})")
        for j, (ra, rb) in enumerate(zip(a[2], b[1], strict=False)):
            # where the viewer shows None, vizexport names the rewrite by where it ran ("graph_rewrite file.py:12")
            same = ra == rb or (ra is None and isinstance(rb, str) and rb.startswith("graph_rewrite"))
            t.check("ctx", same, f"ctx {i} rewrite {j}: viewer name {ra!r} vizexport {rb!r}")
    flat, uops = view["uops"], mine["uops"]
    for k in range(0, len(flat), 3):
        i, op, dt = flat[k], view["ops"][flat[k + 1]], view["dtypes"][flat[k + 2]]
        x_op, x_dt = uops.get(i, (None, None))
        t.check("op", op == x_op, f"uop {i}: viewer {op} vizexport {x_op}")
        mine_dt = "" if x_dt == "void" else str(x_dt)
        t.check("dtype", mine_dt == dt.removeprefix("dtypes."), f"uop {i} {op}: viewer {dt!r} vizexport {x_dt!r}")
    compare_uop_lists(t, view.get("uop_lists", {}), mine["uop_lists"])


RANGES = slice(25, 37)  # print_uops' ranges column (": " + range names padded to 10), which vizexport leaves out


def compare_uop_lists(t: Tally, view: dict, mine: dict) -> None:
    """Each "View UOp List" line by line, all columns but the ranges."""
    for ctx, lines in view.items():
        ours = mine.get(ctx) or []
        t.check("uops", len(lines) == len(ours), f"ctx {ctx}: viewer {len(lines)} UOps, vizexport {len(ours)}")
        for a, b in zip(lines, ours, strict=False):
            a = a[:RANGES.start] + a[RANGES.stop:]
            t.check("uops", a == b, f"ctx {ctx}: viewer {a!r} vizexport {b!r}")


def materialize(path: Path, tmp: Path) -> Path | None:
    """A set's .pkl.gz as a plain file vizexport can open (None if the set has no such pickle)."""
    if not path.exists():
        return None
    dst = tmp / path.name.removesuffix(".gz")
    with gzip.open(path, "rb") as src, open(dst, "wb") as f:
        shutil.copyfileobj(src, f)
    return dst


def compare_set(d: Path, examples: int) -> tuple[Tally, str]:
    t = Tally(examples)
    view = json.loads(gzip.decompress((d / "figures.json.gz").read_bytes()))
    with tempfile.TemporaryDirectory() as tmp:
        prof, rew = (materialize(d / f"{k}.pkl.gz", Path(tmp)) for k in ("profile", "rewrites"))
        try:
            mine = vizexport_figures(prof, rew)
        except Exception as e:
            return t, f"vizexport failed: {type(e).__name__}: {e}"[:200]
    note = ""
    if "profile" in view and "error" in view["profile"]:
        note = f"viewer profile error: {view['profile']['error'][:80]}"
    elif "profile" in view and "profile" in mine:
        compare_profile(t, view["profile"], mine["profile"])
    if "rewrites" in view and "rewrites" in mine:
        compare_rewrites(t, view["rewrites"], mine["rewrites"])
    return t, note


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--sets", default="", help="regex on set names")
    ap.add_argument("--examples", type=int, default=2)
    ap.add_argument("--json", type=Path, help="also write the table and examples as JSON")
    a = ap.parse_args()
    sets = sorted(d for d in a.corpus.iterdir() if (d / "figures.json.gz").exists() and re.search(a.sets, d.name))
    print(f"{'set':24} {'compared':>8} {'differ':>7}  " + " ".join(f"{c:>11}" for c in CLASSES))
    results = {}
    for d in sets:
        t, note = compare_set(d, a.examples)
        results[d.name] = {"compared": t.n, "differ": t.d, "examples": {c: e for c, e in t.ex.items() if e},
                           "note": note}
        cells = " ".join(f"{f'{t.d[c]}/{t.n[c]}' if t.n[c] else '-':>11}" for c in CLASSES)
        print(f"{d.name:24} {sum(t.n.values()):8} {sum(t.d.values()):7}  {cells}  {note}", flush=True)
    differing = sum(1 for r in results.values() if sum(r["differ"].values()) or r["note"])
    print(f"\n{differing} of {len(results)} sets differ from the release's own viewer\n")
    for name, r in results.items():
        for c, ex in r["examples"].items():
            for e in ex:
                print(f"{name:24} {c:7} {e}"[:300])
    if a.json:
        a.json.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
