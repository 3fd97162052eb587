"""tinygrad's own per-instruction SQTT tables ("sqtt-insts": PC, Instruction, Hits, Cycles, Stall, Type, and per hit
N, Clk, Idle, Dur, Stall) for the SQTT fixtures, as comparison data: tests/data/sqtt_insts/<arch>_<name>.json.gz.

tinygrad computes these rows with AMD's closed rocprof-trace-decoder library (tinygrad's extra/sqtt/roc.py, which its
viewer calls for the "OCC" step of a SQTT context; extra/ is not in tinygrad's wheel). So this tool runs with the
tinygrad release that wrote the fixtures, from its source tree, and the library (0.1.6, the version tinygrad's
extra/sqtt/install_rocprof_decoder.py installs):

    git --git-dir=<tinygrad repo> archive v0.13.0 | tar -x -C /tmp/tg-013
    PYTHONPATH=/tmp/tg-013 ROCPROF_PATH=/path/to/librocprof-trace-decoder.so \\
        <python with tinygrad 0.13.0's deps> tools/sqtt_insts_reference.py ../shared/fixtures/sqtt tests/data/sqtt_insts

It must not be imported by vizexport or its tests (it imports tinygrad).
"""
from __future__ import annotations

import gzip
import json
import pickle
import sys
from pathlib import Path


def tables(path: Path) -> list[dict]:
    """Every instruction-traced wave's table, as tinygrad's viewer serves it (one entry per /amd-sqtt-insts step)."""
    from tinygrad.viz.serve import VizData, get_render, load_amd_counters
    with open(path, "rb") as f:
        profile = pickle.load(f)  # the fixtures are tinygrad's own pickles, read by tinygrad here
    data = VizData()
    load_amd_counters(data, profile)
    out = []
    for i, ctx in enumerate(data.ctxs):
        occ = [j for j, s in enumerate(ctx["steps"]) if s["name"] == "OCC"]
        if not occ:
            continue
        get_render(data, f"/amd-sqtt-occ?ctx={i}&step={occ[0]}")  # adds a step per traced wave
        for k, step in enumerate(ctx["steps"]):
            if "amd-sqtt-insts" in str(step.get("query")):
                r = get_render(data, f"/amd-sqtt-insts?ctx={i}&step={k}")
                out.append({"ctx": ctx["name"], "step": step["name"], "loc": step.get("loc"), "cols": r["cols"],
                            "rows": r["rows"], "metadata": r["metadata"]})
    return out


def main(src: Path, dst: Path) -> None:
    dst.mkdir(parents=True, exist_ok=True)
    for path in sorted(src.glob("*/profile_*_run_0.pkl")):
        found = tables(path)
        if found:
            text = json.dumps(found, default=str, separators=(",", ":"))
            (dst / f"{path.parent.name}_{path.stem}.json.gz").write_bytes(gzip.compress(text.encode(), mtime=0))
        print(path.parent.name, path.stem, len(found), "waves", sum(len(t["rows"]) for t in found), "rows")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
