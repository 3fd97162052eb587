"""Reference figures for every fixture pickle, computed with the REAL tinygrad release that wrote it.

Usage: python tools/expected_figures.py   (rerunnable; writes tests/data/expected.json; venvs via tools/tgvenv.py)

Each pickle is loaded in a subprocess of that release's venv (this same file runs there with --child). Output is keyed
by the path relative to the fixtures root ("tinygrad/0.14.0-null/profile.pkl", "sqtt/gfx1100/profile_gemm_run_0.pkl")
or "sample/profile.pkl"; every entry has "tinygrad" (the release that loaded it, or null plus "reason" if none did).

Profile figures: n_events, events {device: {kind: count}}, span_ns [first, last] (host clock, device offsets applied;
the last ProfileDeviceEvent of a device wins, as in the viewer), memory_peak {device: bytes} (running sum over
alloc/free in list order) and viewer: what the release's own viz.serve.get_profile computes, decoded (per-track event
counts, peaks of memory/line tracks); null plus viewer_reason where unavailable.
Rewrites figures: contexts, rewrites (tracked graph rewrites), matches (replacement not None), match_records.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path

FIXTURES = Path("/work/shared/fixtures")
ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "vizexport" / "data" / "sample"
OUT = ROOT / "tests" / "data" / "expected.json"
MIRROR = Path("/work/.mirror/tinygrad+tinygrad/repo")
MASTER_COMMIT = "a9069c177a"
MASTER_SRC = Path(tempfile.gettempdir()) / f"tgsrc-{MASTER_COMMIT}"
SQTT_RELEASES = ["0.13.0", "0.14.0", "master"]

KINDS = {"ProfileRangeEvent": "range", "ProfileDeviceEvent": "device", "ProfileProgramEvent": "program",
         "ProfileGraphEvent": "graph", "ProfileSQTTEvent": "sqtt", "ProfilePMCEvent": "pmc", "ProfilePMAEvent": "pma"}


# ---- child side: runs inside a tinygrad venv, may import tinygrad ----

def to_ns(us) -> int:
    return int((Decimal(us) * 1000).to_integral_value(rounding=ROUND_HALF_EVEN))


def device_offsets(events: list) -> dict:
    """device -> function(is_copy) -> Decimal offset, from the last ProfileDeviceEvent of that exact device string."""
    offsets = {}
    for e in events:
        if type(e).__name__ != "ProfileDeviceEvent":
            continue
        if hasattr(e, "comp_tdiff"):  # <= 0.12: compute/copy offsets (the viewer uses comp when copy is None)
            comp, copy = e.comp_tdiff, e.comp_tdiff if e.copy_tdiff is None else e.copy_tdiff
            offsets[e.device] = lambda is_copy, comp=comp, copy=copy: copy if is_copy else comp
        else:
            offsets[e.device] = lambda is_copy, tdiff=e.tdiff: tdiff
    return offsets


def nbytes(arg: dict) -> int:
    if "nbytes" in arg:  # 0.11: dtype is a str, size given directly
        return arg["nbytes"]
    return min(arg["sz"], 10**12) * arg["dtype"].itemsize


def profile_figures(events: list) -> dict:
    offsets = device_offsets(events)

    def shift(dev: str, x: object) -> Decimal:
        off = offsets.get(dev)
        return Decimal(0) if off is None else off(getattr(x, "is_copy", False))

    counts: dict = {}
    stamps: list = []
    mem: dict = {}
    sizes: dict = {}
    peaks: dict = {}

    def count(dev: str, kind: str) -> None:
        counts.setdefault(dev, {})
        counts[dev][kind] = counts[dev].get(kind, 0) + 1

    for e in events:
        cls = type(e).__name__
        if cls == "ProfilePointEvent":
            count(e.device, e.name)
            stamps.append(e.ts)
            if e.name == "alloc":
                sizes[e.key] = nbytes(e.arg)
                mem[e.device] = mem.get(e.device, 0) + sizes[e.key]
                peaks[e.device] = max(peaks.get(e.device, 0), mem[e.device])
            elif e.name == "free":
                mem[e.device] = mem.get(e.device, 0) - sizes.get(e.key, 0)
        elif cls == "ProfileGraphEvent":
            count(e.ents[0].device, "graph")
            for ent in e.ents:
                count(ent.device, "graph_entry")
                stamps += [e.sigs[ent.st_id] + shift(ent.device, ent), e.sigs[ent.en_id] + shift(ent.device, ent)]
        else:
            count(e.device, KINDS.get(cls, cls))
            if cls == "ProfileRangeEvent":
                stamps += [x + shift(e.device, e) for x in (e.st, e.en) if x is not None]
    ns = [to_ns(x) for x in stamps]
    span = [min(ns), max(ns)] if ns else None
    return {"n_events": len(events), "events": counts, "span_ns": span, "memory_peak": peaks}


def decode_bytepack(blob: bytes, mem_flag: bool) -> dict:
    """get_profile's bytepack (serve.py get_profile/graph_layout; 0.12 memory tracks lack the linear byte):
    {"dur_us", "peak", "index" (strings, markers, …), "tracks": {name: {"events": [(name id, ref, key, st, dur, fmt
    id)]} or {"peak": bytes, "points": n}}} in track order."""
    off = 0

    def u(fmt: str) -> tuple:
        nonlocal off
        vals = struct.unpack_from(fmt, blob, off)
        off += struct.calcsize(fmt)
        return vals

    dur, peak, index_len, n_tracks = u("<IQII")
    index = json.loads(blob[off:off + index_len])
    off += index_len
    tracks: dict[str, dict] = {}
    for _ in range(n_tracks):
        name_len = u("<B")[0]
        name = blob[off:off + name_len].decode()
        off += name_len
        kind, n = u("<BI")
        if kind == 0:
            tracks[name] = {"events": [u("<IIIIfI") for _ in range(n)]}
            continue
        linear = u("<B")[0] if mem_flag else 0
        tracks[name] = {"peak": u("<Q")[0], "points": n}
        for _ in range(n):
            if linear or u("<BII")[0]:  # line point, or alloc after its (1, ts, key) head
                u("<IQ")
            else:
                n_users = u("<I")[0]
                off += n_users * struct.calcsize("<IIIB")
    assert off == len(blob), f"bytepack: {len(blob) - off} trailing bytes"
    return {"dur_us": dur, "peak": peak, "index": index, "tracks": tracks}


def bytepack_figures(blob: bytes, mem_flag: bool) -> dict:
    """The viewer figures the tests compare: per-track event counts, track order, memory track peaks, markers."""
    d = decode_bytepack(blob, mem_flag)
    tracks = d["tracks"]
    return {"format": "bytepack", "dur_us": d["dur_us"], "peak": d["peak"],
            "tracks": {k: len(t["events"]) if "events" in t else t["points"] for k, t in tracks.items()},
            "track_order": list(tracks), "track_peaks": {k: t["peak"] for k, t in tracks.items() if "peak" in t},
            "markers": len(d["index"]["markers"])}


def decode_json_profile(blob: bytes) -> dict:
    """0.11 get_profile returns JSON: timelines have shapes, memory tracks shapes/peak/timestamps (alloc+free+end)."""
    data = json.loads(blob)
    tracks, track_peaks = {}, {}
    for name, v in data["layout"].items():
        n = len(v["timestamps"]) - 1 if "peak" in v else len(v["shapes"])
        if n:  # keep non-empty tracks only, like the later bytepack
            tracks[name] = n
            if "peak" in v:
                track_peaks[name] = v["peak"]
    return {"format": "json", "dur_us": data["et"] - data["st"], "peak": max(track_peaks.values(), default=0),
            "tracks": tracks, "track_order": list(tracks), "track_peaks": track_peaks}


def viewer_figures(events: list) -> dict:
    try:
        from tinygrad.viz import serve
    except ImportError as e:
        raise RuntimeError(f"this release has no tinygrad.viz.serve ({e})") from None
    if not hasattr(serve, "get_profile"):
        raise RuntimeError("tinygrad.viz.serve has no get_profile in this release")
    blob = serve.get_profile(serve.VizData(), events) if hasattr(serve, "VizData") else serve.get_profile(events)
    if blob is None:
        raise RuntimeError("get_profile returned None (no timestamps)")
    if not hasattr(serve, "enum_str"):
        return decode_json_profile(blob)
    return bytepack_figures(blob, mem_flag=not hasattr(serve, "mem_layout"))


def rewrites_figures(trace) -> dict:
    if isinstance(trace, list):  # 0.10.0: [(key, [TrackedRewriteContext])]
        keys, groups = [k for k, _ in trace], [g for _, g in trace]
    elif isinstance(trace, tuple):  # 0.10.1-0.11: (keys, ctxs[, uop_fields])
        keys, groups = trace[0], trace[1]
    else:  # 0.12+: RewriteTrace
        keys, groups = trace.keys, trace.rewrites
    matches = [m for g in groups for rw in g for m in rw.matches]
    return {"contexts": len(keys), "rewrites": sum(len(g) for g in groups),
            "matches": sum(m[1] is not None for m in matches), "match_records": len(matches)}


def error_text(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"[:400]


def child(path: str) -> dict:
    import pickle
    try:
        with open(path, "rb") as f:
            obj = pickle.load(f)
    except Exception as e:
        return {"load_error": error_text(e)}
    if Path(path).name.startswith("rewrites"):
        return rewrites_figures(obj)
    ret = profile_figures(obj)
    try:
        ret["viewer"] = viewer_figures(obj)
    except Exception as e:
        ret["viewer"], ret["viewer_reason"] = None, error_text(e)
    return ret


# ---- parent side: plain Python, never imports tinygrad ----

def venv_for(release: str) -> str:
    from make_sample import ensure_venv
    if release == "master":
        if not MASTER_SRC.exists():
            tmp = Path(tempfile.mkdtemp(dir=MASTER_SRC.parent))
            git = ["git", "-C", str(MIRROR), "archive", MASTER_COMMIT]
            archive = subprocess.run(git, capture_output=True, check=True)
            subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive.stdout, check=True)
            tmp.rename(MASTER_SRC)
        os.environ["TINYGRAD_SRC"] = str(MASTER_SRC)
    return ensure_venv(release)


def releases_for(key: str) -> list:
    group, name = key.split("/")[:2]
    if group == "sqtt":
        return SQTT_RELEASES
    if group == "sample":
        return ["0.14.0"]
    return ["master"] if name == "HEAD" else [name.split("-")[0]]


def pickles() -> dict:
    files = {str(p.relative_to(FIXTURES)): p for p in FIXTURES.glob("tinygrad/*/*.pkl")}
    files.update({str(p.relative_to(FIXTURES)): p for p in FIXTURES.glob("sqtt/*/*.pkl")})
    files.update({f"sample/{p.name}": p for p in SAMPLE.glob("*.pkl")})
    return dict(sorted(files.items()))


def run_child(release: str, path: Path) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if k not in ("VIZ", "PROFILE", "DEBUG", "TRACK_MATCH_STATS", "DEV")}
        env.update(TMPDIR=tmp, CACHEDB=f"{tmp}/cache.db", PYTHONPATH="")
        cmd = [venv_for(release), str(Path(__file__).resolve()), "--child", str(path)]
        try:
            proc = subprocess.run(cmd, env=env, cwd=tmp, capture_output=True, text=True, timeout=1200, check=False)
        except subprocess.TimeoutExpired:
            return {"load_error": "child timed out after 1200 s"}
    if proc.returncode:
        return {"load_error": f"child exited {proc.returncode}: {proc.stderr.strip()[-300:]}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def figures_for(key: str, path: Path) -> dict:
    errors = {}
    for release in releases_for(key):
        ret = run_child(release, path)
        if "load_error" not in ret:
            return {"tinygrad": release, **ret, **({"load_errors": errors} if errors else {})}
        errors[release] = ret["load_error"]
    return {"tinygrad": None, "reason": errors}


def summary(key: str, r: dict) -> str:
    if r["tinygrad"] is None:
        return f"{key:50} {'-':8} not loaded: {next(iter(r['reason'].values()))[:60]}"
    if "contexts" in r:
        matches = f"{r['matches']}/{r['match_records']}"
        return f"{key:50} {r['tinygrad']:8} ctx={r['contexts']} rw={r['rewrites']} match={matches}"
    v, mem = r["viewer"], r["memory_peak"]
    same = v is None or all(v["track_peaks"].get(f"{d} Memory") == p for d, p in mem.items())
    view = "viewer=-" if v is None else f"tracks={len(v['tracks'])}" + ("" if same else " MEM-PEAK-DIFFERS")
    peak = max(mem.values(), default=0)
    return f"{key:50} {r['tinygrad']:8} ev={r['n_events']} devs={len(r['events'])} peak={peak} {view}"


def main() -> None:
    results = {key: figures_for(key, path) for key, path in pickles().items()}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(results, sort_keys=True, indent=1) + "\n")
    for key, r in results.items():
        print(summary(key, r))
    print(f"wrote {OUT.relative_to(ROOT)} ({len(results)} files)")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        print(json.dumps(child(sys.argv[2])))
    else:
        main()
