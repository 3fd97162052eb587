"""Timeline → Chrome trace JSON (the legacy format ui.perfetto.dev and chrome://tracing open), streamed.

Root tracks become processes and every slice track (lane) a thread, both with sort indices in timeline order; slices
are `X` events, instants `i`, counters `C` (named so the trace processor calls the track `<name>`), flows `s`/`f`
(category and name: the flow's kind, `dep` or `launch`). A slice's Python callstack is its `sf`, a node of the
top-level `stackFrames` tree (one node per frame and caller); the trace's metadata is the top-level `metadata`.
Timestamps are µs with three decimals, i.e. exact ns. A `Layout` decides processes, threads and what each slice
carries beyond its name and times; `Layout` itself is vizexport's own, `kineto.KinetoLayout` the PyTorch profiler's.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from itertools import islice
from typing import TextIO

from ..limits import capped
from ..output import Progress
from ..timeline import FLOW_DEP, Timeline, Track

WRITE_EVENTS = 1024  # events written at once (a write per event costs more than the event)


def batched(items: Iterable[str], n: int) -> Iterator[list[str]]:
    it = iter(items)
    while chunk := list(islice(it, n)):
        yield chunk


def _us(ns: int) -> str:
    sign, ns = ("-", -ns) if ns < 0 else ("", ns)
    return f"{sign}{ns // 1000}.{ns % 1000:03d}"


class Layout:
    """vizexport's own layout: a process per root track (pid: its uuid), a thread per slice track (tid: its uuid),
    slices with their own args."""

    decorates = False  # whether slice() adds a category or args (False: the fast path writes args as they are)

    def __init__(self, tl: Timeline) -> None:
        self.tl = tl

    def header(self) -> dict:
        """Top-level keys written before traceEvents."""
        return {}

    def keep(self, t: Track) -> bool:
        return True

    def pid(self, root: Track) -> int:
        return root.uuid

    def tid(self, t: Track) -> int:
        return t.uuid

    def process(self, root: Track, pid: int, order: int) -> list[dict]:
        """Metadata events of a root track's process."""
        return [{"ph": "M", "pid": pid, "name": "process_name", "args": {"name": root.name}},
                {"ph": "M", "pid": pid, "name": "process_sort_index", "args": {"sort_index": order}}]

    def thread(self, t: Track, pid: int, tid: int, order: int) -> list[dict]:
        return [{"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": t.name}},
                {"ph": "M", "pid": pid, "tid": tid, "name": "thread_sort_index", "args": {"sort_index": order}}]

    def slice(self, t: Track, i: int, name: str) -> tuple[str | None, str, dict | None]:
        """(category, name, args) of event i of slice track t (used when `decorates`)."""
        return None, name, t.args.get(i)


def _events(tl: Timeline, layout: Layout, progress: Progress | None = None) -> Iterator[str]:
    dumps = json.dumps
    tracks = tl.walk()
    root_of: dict[int, Track] = {}
    leaves = stack_frames(tl)[1] if tl.stacks else []
    done, total = 0, tl.n_events()
    for order, t in enumerate(tracks):
        if progress is not None and len(t):
            done += len(t)
            progress(done, total)
        root = t if not t.parent else root_of[t.parent]
        root_of[t.uuid] = root
        if not layout.keep(root) or not layout.keep(t):
            continue
        pid = layout.pid(root)
        if not t.parent:
            yield from map(dumps, layout.process(t, pid, order))
        if t.kind == "counter":  # the trace processor names a C track "<name> <arg key>"
            name, key = _counter_name(tl, t)
            for ts, v in zip(t.ts, t.values, strict=True):
                yield f'{{"ph":"C","pid":{pid},"name":{name},"ts":{_us(ts)},"args":{{{key}:{v}}}}}'
            continue
        if t.kind != "slice" or not len(t):
            continue
        tid = layout.tid(t)
        yield from map(dumps, layout.thread(t, pid, tid, order))
        yield from _slices(tl, t, pid, tid, layout if layout.decorates else None, leaves)


def _counter_name(tl: Timeline, t: Track) -> tuple[str, str]:
    """(C event name, arg key) so that the trace processor's "<name> <key>" is unique per track: a root's direct
    counter keeps its own name ("NULL" + "Memory"); deeper ones are qualified by their path below the root."""
    path = [x.name for x in tl.path(t)[1:-1]]
    name, key = (" / ".join(path), t.name) if path else (t.name.rsplit(" ", 1)[0], t.name.rsplit(" ", 1)[-1])
    return json.dumps(name), json.dumps(key)


def _slices(tl: Timeline, t: Track, pid: int, tid: int, layout: Layout | None, leaves: list[int]
            ) -> Iterator[str]:
    dumps, strings, kinds = json.dumps, tl.strings, tl.flow_kinds
    head = f'"pid":{pid},"tid":{tid}'
    for i in range(len(t)):
        ts, d = _us(t.ts[i]), t.dur[i]
        if layout is None:
            name, cat = dumps(strings[t.names[i]]), ""
            args = f',"args":{dumps(t.args[i], default=str)}' if i in t.args else ""
        else:
            c, text, a = layout.slice(t, i, strings[t.names[i]])
            name, cat = dumps(text), f'"cat":{dumps(c)},' if c else ""
            args = f',"args":{dumps(a, default=str)}' if a else ""
        if i in t.stacks:
            args += f',"sf":{leaves[t.stacks[i]]}'
        if d < 0:
            yield f'{{"ph":"i","s":"t",{cat}{head},"name":{name},"ts":{ts}{args}}}'
        else:
            yield f'{{"ph":"X",{cat}{head},"name":{name},"ts":{ts},"dur":{_us(d)}{args}}}'
        for f in t.flows_out.get(i, ()):
            k = kinds.get(f, FLOW_DEP)
            yield f'{{"ph":"s","cat":"{k}","id":{f},{head},"name":"{k}","ts":{ts}}}'
        for f in t.flows_in.get(i, ()):
            k = kinds.get(f, FLOW_DEP)
            yield f'{{"ph":"f","bp":"e","cat":"{k}","id":{f},{head},"name":"{k}","ts":{ts}}}'


def stack_frames(tl: Timeline) -> tuple[dict[str, dict], list[int]]:
    """The `stackFrames` tree of every callstack (a node per frame and caller chain) and each stack's leaf node."""
    nodes: dict[tuple, int] = {}
    frames: dict[str, dict] = {}
    leaves = []
    for stack in tl.stacks:
        parent: int | None = None
        for f in stack:
            key = (parent, f)
            node = nodes.get(key)
            if node is None:
                node = nodes[key] = len(nodes) + 1
                frames[str(node)] = {"name": capped(f.label()), "category": capped(f.file),
                                     **({"parent": str(parent)} if parent is not None else {})}
            parent = node
        leaves.append(parent or 0)
    return frames, leaves


def write(tl: Timeline, out: TextIO, progress: Progress | None = None, layout: Layout | None = None) -> None:
    """Stream `tl` as Chrome JSON in `layout` (default: vizexport's own); `progress(done, total)` is told the events
    written so far, a track at a time."""
    layout = Layout(tl) if layout is None else layout
    out.write("{" + "".join(f"{json.dumps(k)}: {json.dumps(v, default=str)}, " for k, v in layout.header().items())
              + '"traceEvents":[\n')
    sep = ""
    for chunk in batched(_events(tl, layout, progress), WRITE_EVENTS):
        out.write(sep + ",\n".join(chunk))
        sep = ",\n"
    out.write('\n],"displayTimeUnit":"ns"')
    if tl.stacks:
        out.write(',"stackFrames":' + json.dumps(stack_frames(tl)[0]))
    meta = tl.trace_metadata()
    if meta:
        out.write(',"metadata":' + json.dumps(meta))
    out.write('}\n')
