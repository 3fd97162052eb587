"""What one tinygrad release's OWN viewer shows for a pickle set, computed inside that release's venv.

Usage (run by tools/make_corpus.py with the release's python): viewer_figures.py PROFILE|- REWRITES|- OUT.json

Everything comes from the release's `tinygrad.viz.serve`, loaded the way its server's __main__ loads it:
- 0.11 ("json"): get_metadata(keys, ctxs) into the module globals, get_profile(events) -> JSON layout.
- 0.12 ("bytepack12"): get_rewrites(trace) into the globals, get_profile(events) -> bytepack (kernel figures as text
  lines; memory tracks without the linear byte); decoded here since 0.12 ships no cli.py.
- 0.13+ ("bytepack"): VizData + load_rewrites, get_profile(data, events), decoded by the release's viz/cli.py.

Output (JSON): "profile": start_us (absolute time base: min int(µs) over flatten_events, as get_profile), dur_us,
track_order, tracks {track: [[name, st_us, dur_us, nums|null], ...]} (name as drawn, ANSI codes kept; st relative to
start_us; nums: "FLOPS", "B/s mem", "B/s lds" in FLOP/s and B/s, copies "B/s" and "B", and for 0.11/0.12 the
displayed "text"), memory_peaks {device: bytes}, markers [[name, ts_us]];
"rewrites": contexts [[name, steps in the sidebar, [tracked rewrite names]]], and every UOp a step graph draws:
uops = flat [uop_fields id, op index, dtype index, ...] into the "ops" and "dtypes" tables (op = first label line,
dtype = the label's dtype line, "" for void), dtype_names (DType.name -> the dtypes.<attr> its text shows, where
they differ), uop_lists {ctx index: lines of its "View UOp List"}, slow_graphs / failed_graphs (see graph_json).
UOps drawn = the nodes of uop_to_json(sink) of every tracked rewrite and of uop_to_json(u1) of every match: a later
step's graph only rebuilds parents (same op and dtype) around those, so this covers every (op, dtype) it shows.
"""
import json
import pickle
import signal
import sys
from pathlib import Path

NUM_KEYS = ("FLOPS", "B/s mem", "B/s lds", "B/s", "B")
EST_KEYS = ("FLOPS", "B/s mem", "B/s lds")  # the order the viewers compute them in
US = 1e-6  # viewer durations are µs
GRAPH_SECONDS = 3  # a graph's labels taking longer are retried without UOp.render (see graph_json)


class GraphTimeout(BaseException):
    """Raised by the alarm; a BaseException so the viewer's own `except Exception` label guards let it through."""


def load(path: str):
    if path == "-":
        return None
    with open(path, "rb") as f:
        return pickle.load(f)


def family(serve) -> str:
    if hasattr(serve, "VizData"):
        return "bytepack"
    return "bytepack12" if hasattr(serve, "get_rewrites") else "json"


# ---- rewrites ----

class Viewer:
    """The release's viewer state after loading a rewrites trace, with its per-release call signatures."""

    def __init__(self, serve, kind: str, trace) -> None:
        self.serve, self.kind, self.data = serve, kind, None
        if kind == "bytepack":
            from tinygrad.uop.ops import RewriteTrace
            self.data = serve.VizData(trace if trace is not None else RewriteTrace([], [], {}))
            serve.load_rewrites(self.data)
            self.ctxs, tr = self.data.ctxs, self.data.trace
            self.keys, self.rewrites, self.fields = tr.keys, tr.rewrites, tr.uop_fields
        elif kind == "bytepack12":
            from tinygrad.uop.ops import RewriteTrace
            serve.trace = trace if trace is not None else RewriteTrace([], [], {})
            serve.ctxs = self.ctxs = serve.get_rewrites(serve.trace)
            self.keys, self.rewrites, self.fields = serve.trace.keys, serve.trace.rewrites, serve.trace.uop_fields
        else:
            serve.contexts = trace
            serve.ctxs = self.ctxs = serve.get_metadata(*trace[:2]) if trace is not None else []
            self.keys, self.rewrites, self.fields = trace if trace is not None else ([], [], {})

    def reconstruct(self, i: int):
        return self.serve._reconstruct(self.data, i) if self.data is not None else self.serve._reconstruct(i)

    def to_json(self, u) -> dict:
        return self.serve.uop_to_json(self.data, u) if self.data is not None else self.serve.uop_to_json(u)


def dtype_text(u, label: str) -> str:
    """The dtype line of u's label: f"\\n{u.dtype}" unless void, as every release's uop_to_json writes it."""
    from tinygrad.dtype import dtypes
    if u.dtype == dtypes.void:
        return ""
    text = str(u.dtype)
    return text if f"\n{text}" in label else f"?{text}"  # '?': not found in the label (never seen)


def on_alarm(*_) -> None:
    raise GraphTimeout


def graph_json(v: Viewer, root: int, stats: dict) -> tuple:
    """(UOp, uop_to_json of it) for uop_fields[root]. Some releases' INDEX labels (u.render()) take minutes and
    gigabytes on big kernels (0.12 CPU codegen graphs); such a graph is built again with UOp.render stubbed, which
    changes only that label line, not the node set nor any op or dtype line."""
    from tinygrad.uop.ops import UOp
    top = v.reconstruct(root)
    signal.signal(signal.SIGALRM, on_alarm)
    render = UOp.render
    try:
        for attempt in ("slow_graphs", "failed_graphs"):
            try:
                signal.setitimer(signal.ITIMER_REAL, GRAPH_SECONDS)
                return top, v.to_json(top)
            except GraphTimeout:
                stats[attempt] += 1
                UOp.render = lambda *_a, **_k: "<render skipped>"
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        raise TimeoutError(f"uop_to_json over {GRAPH_SECONDS} s even without UOp.render")
    finally:
        UOp.render = render


def drawn_uops(v: Viewer) -> tuple[dict, dict]:
    """uop_fields id -> (op, dtype text) for every node drawn in a rewrite's input graph or a match's new subtree;
    and counts of graphs that were slow (labels built with UOp.render stubbed) or failed."""
    roots = [rw.sink for group in v.rewrites for rw in group]
    roots += [m[1] for group in v.rewrites for rw in group for m in rw.matches if m[1] is not None]
    seen: dict[int, tuple[str, str]] = {}
    stats = {"slow_graphs": 0, "failed_graphs": 0}
    for root in roots:
        if root in seen:
            continue
        try:
            top, graph = graph_json(v, root, stats)
        except Exception:
            stats["failed_graphs"] += 1
            continue
        stack, visited = [(root, top)], set()
        while stack:
            i, u = stack.pop()
            if i in visited:
                continue
            visited.add(i)
            node = graph.get(id(u))
            if node is not None and i not in seen:
                seen[i] = (node["label"].split("\n")[0], dtype_text(u, node["label"]))
            stack.extend(zip(v.fields[i][2], u.src, strict=False))
    return seen, stats


def rewrites_figures(v: Viewer) -> dict:
    contexts = [[ctx["name"], len(ctx["steps"]), [rw.name for rw in group]]
                for ctx, group in zip(v.ctxs, v.rewrites, strict=False)]  # 0.12+ may append counter ctxs
    from tinygrad.dtype import INVERSE_DTYPES_DICT
    seen, stats = drawn_uops(v)
    ops: dict[str, int] = {}
    dts: dict[str, int] = {}
    flat: list[int] = []
    for i in sorted(seen):
        op, dt = seen[i]
        flat += [i, ops.setdefault(op, len(ops)), dts.setdefault(dt, len(dts))]
    names = {k: x for k, x in INVERSE_DTYPES_DICT.items() if k != x}
    return {"contexts": contexts, "ops": list(ops), "dtypes": list(dts), "uops": flat, "dtype_names": names,
            "uop_lists": uop_lists(v), **stats}


def uop_lists(v: Viewer) -> dict:
    """ctx index -> the lines of its "View UOp List" step (ANSI codes removed), for releases that have one (0.12+).
    0.12 prints the ProgramSpec's uops; 0.13+ replay to the do_linearize match (the pattern's code line is read from
    the release's installed source, so this must run on the machine that made the pickles)."""
    import re
    out = {}
    for i, ctx in enumerate(v.ctxs):
        for j, step in enumerate(ctx["steps"]):
            if step["name"] != "View UOp List":
                continue
            try:
                if v.kind == "bytepack":
                    src = v.serve.get_render(v.data, f"/uops?ctx={i}&step={j}")["src"]
                else:
                    src = v.serve.get_stdout(lambda step=step: v.serve.print_uops(step["data"].uops or []))
            except Exception as e:  # the viewer's own failure is a figure too
                src = f"error: {type(e).__name__}: {e}"
            out[i] = re.sub(r"\x1b\[[0-9;]*m", "", src).splitlines()
    return out


# ---- profile ----

def decode_bytepack12(blob: bytes) -> dict:
    """0.12's get_profile bytepack (timeline fmt is text lines; memory tracks carry no linear byte)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tools/: the project's bytepack decoder
    from expected_figures import decode_bytepack
    d = decode_bytepack(blob, mem_flag=False)
    strings, layout = d["index"]["strings"], {}
    for name, t in d["tracks"].items():
        layout[name] = {"events": [{"name": strings[e[0]], "st": e[3], "dur": e[4], "text": strings[e[5]]}
                                   for e in t["events"]]} if "events" in t else {"peak": t["peak"]}
    return {"dur": d["dur_us"], "layout": layout, "markers": d["index"]["markers"]}


def profile_v13(serve, v: Viewer, events: list) -> dict:
    from tinygrad.device import ProfileDeviceEvent
    from tinygrad.viz.cli import decode_profile
    dec = decode_profile(serve.get_profile(v.data, events))
    diffs = {e.device: e.tdiff for e in events if isinstance(e, ProfileDeviceEvent)}
    tracks, peaks = {}, {}
    for name, t in dec["layout"].items():
        if t["event_type"] == 0:
            tracks[name] = [[e["name"], e["st"], e["dur"], {k: e["fmt"][k] for k in NUM_KEYS if k in e["fmt"]} or None]
                            for e in t["events"]]
        elif not t.get("linear") and name.endswith(" Memory"):
            peaks[name.removesuffix(" Memory")] = t["peak"]
    start = min(int(ts) for ts, _, _ in serve.flatten_events(events, diffs))
    markers = [[m.get("name"), m["ts"]] for m in dec["markers"]]
    return {"start_us": start, "dur_us": dec["dur"], "track_order": list(dec["layout"]), "tracks": tracks,
            "memory_peaks": peaks, "markers": markers}


def profile_v12(serve, events: list) -> dict:
    """The viewer shows rounded text ("12 GFLOPS"); the exact numbers are the values its sym_infer calls returned,
    captured here per device in call order (three per kernel event with figures, in the track's event order)."""
    captured: dict[str, list] = {}
    current = [""]
    sym_infer, timeline_layout = serve.sym_infer, serve.timeline_layout

    def capture(*a, **k):
        ret = sym_infer(*a, **k)
        captured.setdefault(current[0], []).append(ret)
        return ret

    def layout(dev_events, *a, **k):
        current[0] = dev_events[0][3].device if dev_events else ""
        return timeline_layout(dev_events, *a, **k)

    serve.sym_infer, serve.timeline_layout = capture, layout
    try:
        dec = decode_bytepack12(serve.get_profile(events))
    finally:
        serve.sym_infer, serve.timeline_layout = sym_infer, timeline_layout
    tracks, peaks = {}, {}
    for name, t in dec["layout"].items():
        if "peak" in t:
            peaks[name.removesuffix(" Memory")] = t["peak"]
            continue
        values = iter(captured.get(name, []))
        rows = tracks[name] = []
        for e in t["events"]:
            nums = None
            if "FLOPS" in e["text"]:
                nums = {k: next(values) / (e["dur"] * US) for k in EST_KEYS}
            if e["text"]:
                nums = {**(nums or {}), "text": e["text"]}
            rows.append([e["name"], e["st"], e["dur"], nums])
    start = min(int(ts) for ts, _, _ in serve.flatten_events(events))
    markers = [[m.get("name"), m["ts"]] for m in dec["markers"]]
    return {"start_us": start, "dur_us": dec["dur"], "track_order": list(dec["layout"]), "tracks": tracks,
            "memory_peaks": peaks, "markers": markers}


def profile_v11(serve, v: Viewer, events: list) -> dict:
    """0.11's JSON layout: shapes with absolute int µs starts; "info" text only when every estimate is an int; the
    numbers behind it are recomputed from the same ProgramSpec.estimates and duration."""
    data = json.loads(serve.get_profile(events))
    tracks, peaks, start = {}, {}, data["st"]
    for name, t in data["layout"].items():
        if "peak" in t:
            if t["shapes"]:
                peaks[name.removesuffix(" Memory")] = t["peak"]
            continue
        rows = []
        for s in t["shapes"]:
            nums = None
            if s["info"] is not None:
                est = v.keys[s["ref"]].ret.estimates
                nums = {k: x / (s["dur"] * US) for k, x in zip(EST_KEYS, (est.ops, est.mem, est.lds), strict=True)}
                nums["text"] = s["info"]
            rows.append([s["name"], s["st"] - start, s["dur"], nums])
        if rows:
            tracks[name] = rows
    return {"start_us": start, "dur_us": data["et"] - start, "track_order": list(tracks), "tracks": tracks,
            "memory_peaks": peaks, "markers": []}


def main(profile_path: str, rewrites_path: str, out: str) -> None:
    from tinygrad.viz import serve
    kind = family(serve)
    v = Viewer(serve, kind, load(rewrites_path))
    ret: dict = {"family": kind}
    events = load(profile_path)
    if events is not None:
        try:
            if kind == "bytepack":
                ret["profile"] = profile_v13(serve, v, events)
            elif kind == "bytepack12":
                ret["profile"] = profile_v12(serve, events)
            else:
                ret["profile"] = profile_v11(serve, v, events)
        except Exception as e:
            ret["profile"] = {"error": f"{type(e).__name__}: {e}"[:300]}
    if rewrites_path != "-":
        ret["rewrites"] = rewrites_figures(v)
    with open(out, "w") as f:
        json.dump(ret, f, separators=(",", ":"))


if __name__ == "__main__":
    main(*sys.argv[1:4])
