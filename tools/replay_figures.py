"""Reference figures for rewrite replay, computed with the REAL tinygrad release's own viewer code.

Usage: python tools/replay_figures.py [KEY...]   (rerunnable; writes tests/data/replay_figures.json; venvs via
tools/tgvenv.py, as tools/expected_figures.py)

For each rewrites pickle, the release that wrote it replays every tracked rewrite the way its viewer does
(viz/serve.py get_full_rewrite / get_details; 0.10.0 and 0.10.1 ship no viewer in the wheel, so their tag's loop is
followed with the release's own UOp.substitute / UOp.replace). Per rewrite it records
  [steps, final digest, steps digest]
where steps = matches with a replacement + 1, a digest is the first 16 hex digits of sha1 over the graph in toposort
order, one line per node "op|source positions|arg|tag" (args as in `arg_text`), and the steps digest hashes every
step's "graph digest:node count:len(change)" (change = tinygrad's highlighted ids: u1's toposort within the graph).
tests/test_graphs.py computes the same from vizexport's replay.
"""
import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "replay_figures.json"


# ---- shared with tests/test_graphs.py (kept byte-for-byte equal there) ----

def arg_text(a) -> str:
    if a is None or type(a) in (bool, int, str):
        return repr(a)
    if isinstance(a, float):
        return repr(float(a))
    if type(a) in (tuple, list):
        return "(" + ",".join(arg_text(x) for x in a) + ")"
    return type(a).__name__


def digest(lines) -> str:
    return hashlib.sha1("\n".join(lines).encode()).hexdigest()[:16]


# ---- child side: runs inside a tinygrad venv, imports tinygrad ----

def toposort(root) -> list:
    out, seen, stack = [], set(), [(root, False)]
    while stack:
        n, done = stack.pop()
        if id(n) in seen:
            continue
        if done:
            seen.add(id(n))
            out.append(n)
            continue
        stack.append((n, True))
        stack.extend((s, False) for s in reversed(n.src) if id(s) not in seen)
    return out


def graph_digest(root) -> tuple:
    order = toposort(root)
    pos = {id(n): i for i, n in enumerate(order)}
    lines = [f"{n.op.name}|{','.join(str(pos[id(s)]) for s in n.src)}|{arg_text(n.arg)}|"
             f"{arg_text(getattr(n, 'tag', None))}" for n in order]
    return digest(lines), len(order)


class Capture:
    """Stands in for serve.uop_to_json: remembers each graph and answers `id(x) in graph` like the real one."""

    def __init__(self) -> None:
        self.last = None

    def __call__(self, *args):
        self.last = args[-1]
        return {id(n): None for n in toposort(self.last)}


def replay_viewer(serve, data, ctx, cap: Capture) -> list:
    """(digest, size, len(change)) per step, from the release's own generator."""
    if data is not None:
        gen = serve.get_full_rewrite(data, ctx)
    elif hasattr(serve, "get_full_rewrite"):
        gen = serve.get_full_rewrite(ctx)
    else:  # 0.10.2/0.10.3: get_details(k, ctx); 0.11: get_details(ctx)
        gen = serve.get_details(ctx) if serve.get_details.__code__.co_argcount == 1 else serve.get_details(None, ctx)
    out = []
    for step in gen:
        d, n = graph_digest(step.get("_sink", cap.last))
        change = step.get("change", step.get("changed_nodes"))
        out.append(f"{d}:{n}:{len(change or [])}")
    return out


def replay_old(ctx, replace_walk: bool, advance: bool) -> list:
    """0.10.0 (serve._replace_uop: one lookup per node, sink advances) and 0.10.1 (sink.substitute from the input)."""
    def walk(base, replaces):
        if (found := replaces.get(base)) is not None:
            return found
        replaces[base] = ret = base.replace(src=tuple(walk(x, replaces) for x in base.src))
        return ret

    sink = ctx.sink
    d, n = graph_digest(sink)
    out, replaces = [f"{d}:{n}:0"], {}
    for m in ctx.matches:
        u0, u1 = m[0], m[1]
        replaces[u0] = u0 if u1 is None else u1
        if u1 is None:
            continue
        new = walk(sink, dict(replaces)) if replace_walk else sink.substitute(replaces)
        d, n = graph_digest(new)
        ids = {id(x) for x in toposort(new)}
        out.append(f"{d}:{n}:{sum(id(x) in ids for x in toposort(u1))}")
        if advance:
            sink = new
    return out


def child(path: str) -> dict:
    import pickle
    sys.setrecursionlimit(100000)
    import tinygrad
    with open(path, "rb") as f:
        trace = pickle.load(f)
    version = getattr(tinygrad, "__version__", "")
    if isinstance(trace, list):  # 0.10.0
        groups, serve, data = [g for _, g in trace], None, None
    else:
        groups = trace[1] if isinstance(trace, tuple) else trace.rewrites
        serve, data = viewer(trace)
    cap = Capture()
    if serve is not None:
        serve.uop_to_json = cap
    rows = []
    for ci, g in enumerate(groups):
        for ri, ctx in enumerate(g):
            if serve is None:
                steps = replay_old(ctx, isinstance(trace, list), isinstance(trace, list))
            else:
                steps = replay_viewer(serve, data, ctx, cap)
            final = steps[-1].split(":")[0]
            rows.append([ci, ri, len(steps), final, digest(steps)])
    return {"version": version, "rewrites": rows}


def viewer(trace):
    """(serve module, VizData or None) with the trace installed where that release's viewer looks for it."""
    try:
        from tinygrad.viz import serve
    except ImportError:
        return None, None  # 0.10.1 wheel: no viewer
    if hasattr(serve, "VizData"):
        return serve, serve.VizData(trace)
    if hasattr(serve, "trace") or "RewriteTrace" in type(trace).__name__:
        serve.trace = trace  # 0.12
    else:
        serve.contexts = trace  # 0.11: (keys, ctxs, uop_fields)
    return serve, None


# ---- parent side: plain Python, never imports tinygrad ----

def run_child(release: str, path: Path) -> dict:
    import os
    import subprocess
    import tempfile

    from expected_figures import venv_for
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if k not in ("VIZ", "PROFILE", "DEBUG", "TRACK_MATCH_STATS", "DEV")}
        env.update(TMPDIR=tmp, CACHEDB=f"{tmp}/cache.db", PYTHONPATH="")
        cmd = [venv_for(release), str(Path(__file__).resolve()), "--child", str(path)]
        proc = subprocess.run(cmd, env=env, cwd=tmp, capture_output=True, text=True, timeout=3600, check=False)
    if proc.returncode:
        return {"load_error": f"child exited {proc.returncode}: {proc.stderr.strip()[-600:]}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(keys: list) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from expected_figures import pickles, releases_for
    results = json.loads(OUT.read_text()) if OUT.exists() else {}
    for key, path in pickles().items():
        if not path.name.startswith("rewrites") or (keys and key not in keys):
            continue
        release = releases_for(key)[0]
        ret = run_child(release, path)
        results[key] = {"tinygrad": release, **ret}
        n = len(ret.get("rewrites", ()))
        print(f"{key:45} {release:8} {n} rewrites {ret.get('load_error', '')}", flush=True)
        OUT.write_text(json.dumps(results, sort_keys=True, separators=(",", ":")) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        print(json.dumps(child(sys.argv[2])))
    else:
        main(sys.argv[1:])
