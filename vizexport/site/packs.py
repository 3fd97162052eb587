"""Every step of every rewrite, as the site ships it: one script per context (packs/<context>.js) that the step
viewer (static/steps.js) reads and lays out in the browser.

A pack is gzip'd, base64 in a script because a script loads from file:// where a fetch cannot. Unzipped: a JSON
header's length (4 bytes, little-endian), the header, then the integer columns it lists ([name, type, count]: int8,
int16 or int32, little-endian, each from a multiple of 4 bytes) with their bytes in planes: every value's lowest byte,
then every value's next one, and so on. Distances back are mostly small: their high bytes are long runs of zeros
that gzip squeezes, where interleaved they would not be (a training step's packs: 13 % smaller, and quicker to zip).

  header
    looks     distinct node looks: [label, fill, fold rule (0 never, 1 always, 2 as its first source), op,
              argument as folded into a user's box, one-line text for diffs]
    locs      pattern locations [file, line]
    rewrites  [name, depth, steps] per rewrite; its steps follow the previous rewrite's in the step columns
    seconds   per step: its match's time, or null
    errors    [[step, error], …]: the steps that could not be replayed
  columns
    look      per node: its look, or -1 for its origin's
    origin    per node: 0, or how far back the node it copies is (StepNodes.origins)
    src       every node's sources in turn, as distances back; a copy has as many as its origin, 0 where a source
              is its origin's
    nsrc      how many sources each node that is not a copy has
    sink, before, after, loc   per step: its root (a step's graph is everything under it), the matched node, its
              replacement (node numbers) and its pattern's location (in locs), -1 where there is none; each as the
              difference from the step before's (number columns compress where JSON text of them does not)

Nodes are numbered in creation order, so sources always come before their users and distances are positive.
"""
from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from itertools import chain
from pathlib import Path

import numpy as np

from ..forks import SERIAL, Executor
from ..gcpause import gc_paused
from ..graphs.manifest import short_path
from ..output import write_atomic
from ..records import GraphStep, Rewrite, StepGraphs, StepNodes

FOLD_RULES = {"never": 0, "always": 1, "as_source": 2}
GLOBAL = "vizexportPacks"
COLUMN_TYPES = {"<i1": "int8", "<i2": "int16", "<i4": "int32"}  # numpy type → the name the header gives
STEP_COLUMNS = ("sink", "before", "after", "loc")


@dataclass
class PackInfo:
    """What the pages need to know of a context's pack."""

    index: int
    path: str  # relative to the packs' folder
    steps: int
    errors: int


def write_packs(graphs: StepGraphs, folder: Path, jobs: int | None = None, executor: Executor = SERIAL
                ) -> Iterator[PackInfo]:
    """One pack per context with rewrites, written in `executor`'s workers, biggest first (contexts do not share nodes).
    The workers start at once; the caller takes their results when it has done its own work."""
    todo = sorted((i for i, c in enumerate(graphs.contexts) if c.rewrites),
                  key=lambda i: -sum(len(r.matches) for r in graphs.contexts[i].rewrites))
    return executor.started_map(partial(write_pack, graphs, folder), todo, jobs)


def write_pack(graphs: StepGraphs, folder: Path, index: int) -> PackInfo:
    with gc_paused():  # millions of tuples, no cycles
        session = graphs.session()
        ctx = graphs.contexts[index]
        replays = [(rw, session.replay(rw, changes=False).steps) for rw in ctx.rewrites]  # steps.js finds them
        header, columns = encode(session.nodes, replays)
    text = base64.b64encode(gzip.compress(pack_bytes(header, columns), 6, mtime=0)).decode()
    name = f"{index}.js"
    write_atomic(folder / name, f'(window.{GLOBAL} = window.{GLOBAL} || {{}})[{index}] = "{text}";\n'.encode())
    steps = [s for _, ss in replays for s in ss]
    return PackInfo(index, name, len(steps), sum(s.error is not None for s in steps))


def encode(nodes: StepNodes, replays: list[tuple[Rewrite, list[GraphStep]]]) -> tuple[dict, dict[str, np.ndarray]]:
    """The header and columns of one replay session's pack (see the module's docstring). Most nodes are copies (a
    rebuilt user with one source changed): a copy costs its origin's distance and one small number per source.
    Columns are made with numpy: a training step's contexts hold millions of sources."""
    n = len(nodes.src)
    nodes_at = np.arange(n)
    origin = np.full(n, -1)
    copies = nodes.origins()
    if copies:
        origin[np.fromiter(copies, int, len(copies))] = np.fromiter(copies.values(), int, len(copies))
    lens = np.fromiter(map(len, nodes.src), int, n)
    srcs = np.fromiter(chain.from_iterable(nodes.src), int, int(lens.sum()))
    owner = np.repeat(nodes_at, lens)  # the node of each source
    starts = np.cumsum(lens) - lens
    is_copy = origin >= 0
    if (lens[is_copy] != lens[origin[is_copy]]).any():
        raise ValueError("a copied node has another number of sources than its origin")
    of_copy = is_copy[owner]
    same = np.zeros(len(srcs), bool)  # a copy's source that is its origin's at the same place
    k = np.flatnonzero(of_copy)
    same[k] = srcs[starts[origin[owner[k]]] + k - starts[owner[k]]] == srcs[k]
    looks: dict[tuple, int] = {}
    seen: dict[tuple, int] = {}  # (look key, fold rule) → look
    look = np.full(n, -1)
    for m in np.flatnonzero(~is_copy).tolist():
        rule = nodes.fold_rule(m)
        hit = seen.get(kind := (nodes.look_key(m), rule))
        if hit is None:
            arg = nodes.folded(m)[1] if rule == "always" else ""
            key = (nodes.label(m), nodes.fill(m), FOLD_RULES[rule], nodes.op[m], arg, nodes.text(m))
            hit = seen[kind] = looks.setdefault(key, len(looks))
        look[m] = hit
    steps, step_columns = _steps(replays)
    header = {"looks": list(looks), **steps}
    return header, {"look": look, "origin": np.where(is_copy, nodes_at - origin, 0),
                    "src": np.where(same, 0, owner - srcs), "nsrc": lens[~is_copy], **step_columns}


def _steps(replays: list[tuple[Rewrite, list[GraphStep]]]) -> tuple[dict, dict[str, np.ndarray]]:
    """The header's rewrites, seconds, errors and locations, and the step columns (see the module's docstring)."""
    locs: dict[tuple, int] = {}
    rows = [_step(s, rw, locs) for rw, steps in replays for s in steps]
    numbers = np.array([r[:4] for r in rows], np.int64).reshape(-1, 4).T
    header = {"locs": [list(k) for k in locs], "rewrites": [[rw.name, rw.depth, len(steps)] for rw, steps in replays],
              "seconds": [r[4] for r in rows], "errors": [[i, r[5]] for i, r in enumerate(rows) if r[5] is not None]}
    return header, {name: np.diff(col, prepend=0) for name, col in zip(STEP_COLUMNS, numbers, strict=True)}


def pack_bytes(header: dict, columns: dict[str, np.ndarray]) -> bytes:
    """The header's length and JSON, then each column in the smallest type that holds it, its bytes in planes, from
    4-byte boundaries."""
    parts = []
    header = {**header, "columns": []}
    for name, col in columns.items():
        lo, hi = (int(col.min()), int(col.max())) if len(col) else (0, 0)
        kind = next(t for t in COLUMN_TYPES if np.iinfo(t).min <= lo and hi <= np.iinfo(t).max)
        header["columns"].append([name, COLUMN_TYPES[kind], len(col)])
        values = np.ascontiguousarray(col, kind)
        parts.append(_aligned(values.view(np.uint8).reshape(-1, values.itemsize).T.tobytes()))
    head = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    return b"".join([_aligned(len(head).to_bytes(4, "little") + head), *parts])


def _aligned(b: bytes) -> bytes:
    return b + bytes(-len(b) % 4)


def _step(s: GraphStep, rw: Rewrite, locs: dict[tuple, int]) -> list:
    m = rw.matches[s.match] if s.match is not None else None
    loc = locs.setdefault((short_path(m.loc[0]), m.loc[1]), len(locs)) if m is not None and m.loc else -1
    seconds = float(f"{m.seconds:.3g}") if m is not None and m.seconds is not None else None
    return [_id(s.sink), _id(s.before), _id(s.after), loc, seconds, s.error]


def _id(n: int | None) -> int:
    return -1 if n is None else n
