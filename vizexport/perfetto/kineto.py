"""The PyTorch profiler's (Kineto's) dialect of Chrome JSON, so that tools made for PyTorch traces (Holistic Trace
Analysis, TensorBoard's profiler plugin) read a tinygrad run: a Layout for chrome.write.

As Kineto lays a trace out: each device root is a GPU process (pid 0, 1, … in timeline order, labelled `GPU n`),
each of its queue, copy-engine and graph lanes a stream (tid = stream number, named `stream <n> <device>`); host
tracks (TINY, USER, GC) and the markers are threads of one CPU process. Kernels are `cat: kernel`, copies
`cat: gpu_memcpy` named `Memcpy <kind> (<tinygrad name>)` (HtoD, DtoH, DtoD, HtoH: HTA tells memory work from
compute by that prefix), JIT graph batches `gpu_user_annotation` (no `stream` arg, so they are not counted as
kernels twice), host spans `cpu_op`. Device slices carry `device`, `stream` and a `correlation` id unique per
launch; host spans an `External id`. Metadata: `schemaVersion`, `deviceProperties` (id, tinygrad device name and
the properties the profile recorded), `distributedInfo` (rank 0 of 1). SQTT, PMA and buffer-lifetime tracks are left
out: Kineto has no such events (the Perfetto trace has them).
"""
from __future__ import annotations

import re

from ..launchtable import COPY
from ..timeline import Role, Timeline, Track
from .chrome import Layout

HOST_PID = 1_000_000  # Kineto's host process is the OS pid; one that no device index takes
GPU_SORT_BASE = 16_777_216  # Kineto sorts GPU processes after the host by this offset on their index
HOST_MEMORY = frozenset(("TINY", "CPU", "PYTHON", "DISK", "NPY"))  # devices whose buffers live in host memory
_COPY_NAME = re.compile(r"^(\S+) -> (\S+)$")  # tinygrad names a copy "<src> -> <dst>"
DEVICE_ROLES = (Role.QUEUE, Role.COPY)
LEFT_OUT = (Role.SQTT, Role.PMA, Role.BUFFERS)  # Kineto has no such rows: the .pftrace has them


def memcpy_name(name: str) -> str:
    """`NULL -> NULL:1` → `Memcpy DtoD (NULL -> NULL:1)`; `Memcpy (<name>)` when the ends are not named."""
    m = _COPY_NAME.match(name)
    if m is None:
        return f"Memcpy ({name})"
    kind = "".join("H" if end.split(":")[0] in HOST_MEMORY else "D" for end in m.groups())
    return f"Memcpy {kind[0]}to{kind[1]} ({name})"


def kineto_name(name: str, category: str) -> tuple[str, str]:
    """(category, event name) of a device slice as Kineto writes it, from its launch's category (launchtable)."""
    if category == COPY:
        return "gpu_memcpy", memcpy_name(name)
    return "kernel", name


class KinetoLayout(Layout):
    decorates = True

    def __init__(self, tl: Timeline) -> None:
        super().__init__(tl)
        self.gpus = {t.uuid: n for n, t in enumerate(t for t in tl.walk() if not t.parent and t.role == Role.DEVICE)}
        root: dict[int, int] = {}
        for t in tl.walk():
            root[t.uuid] = root[t.parent] if t.parent else t.uuid
        self.gpu_of = {uuid: self.gpus[r] for uuid, r in root.items() if r in self.gpus}  # track → its device index
        self.seen: set[int] = set()
        self.copies = tl.launches.category_names(COPY)  # (track, name id) of the copies (a window's: its run's)
        self.correlation = 0
        self.external = 0

    def header(self) -> dict:
        props = self.tl.device_props
        roots = {t.uuid: t for t in self.tl.tracks if not t.parent}
        devices = [{"id": n, "name": roots[uuid].name, **props.get(roots[uuid].name, {})}
                   for uuid, n in self.gpus.items()]
        return {"schemaVersion": 1, "deviceProperties": devices, "distributedInfo": {"rank": 0, "world_size": 1},
                "traceName": self.tl.title}

    def keep(self, t: Track) -> bool:
        return t.role not in LEFT_OUT

    def pid(self, root: Track) -> int:
        return self.gpus.get(root.uuid, HOST_PID)

    def process(self, root: Track, pid: int, order: int) -> list[dict]:
        if pid in self.seen:
            return []
        self.seen.add(pid)
        gpu = pid != HOST_PID
        meta = {"process_name": root.name if gpu else "tinygrad", "process_labels": f"GPU {pid}" if gpu else "CPU",
                "process_sort_index": GPU_SORT_BASE + pid if gpu else 0}
        key = {"process_name": "name", "process_labels": "labels", "process_sort_index": "sort_index"}
        return [{"ph": "M", "pid": pid, "tid": 0, "name": k, "args": {key[k]: v}} for k, v in meta.items()]

    def thread(self, t: Track, pid: int, tid: int, order: int) -> list[dict]:
        name = t.name if pid == HOST_PID else f"stream {tid} {t.name}"
        return [{"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": name}},
                {"ph": "M", "pid": pid, "tid": tid, "name": "thread_sort_index", "args": {"sort_index": order}}]

    def slice(self, t: Track, i: int, name: str) -> tuple[str | None, str, dict | None]:
        args = t.args.get(i)
        if t.role in DEVICE_ROLES and t.dur[i] >= 0:
            self.correlation += 1
            copy = t.role == Role.COPY or (t.uuid, t.names[i]) in self.copies
            cat, name = kineto_name(name, COPY if copy else "")
            return cat, name, {**(args or {}), "device": self.gpu_of[t.uuid], "stream": t.uuid,
                               "correlation": self.correlation}
        if t.role == Role.GRAPH:
            return "gpu_user_annotation", name, args
        if t.role == Role.HOST:
            self.external += 1
            return "cpu_op", name, {**(args or {}), "External id": self.external}
        return None, name, args
