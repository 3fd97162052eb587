"""Every launch of every kernel and copy, as numpy columns per kernel: what the report's distributions and the diff's
tests need (top_kernels keeps only a capped list of launch dicts)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..records import RewriteLog
from ..timeline import ARG_PROGRAM, Role, Timeline, Track
from .categories import category
from .kernels import device_tracks


@dataclass(frozen=True)
class KernelId:
    """A kernel or copy as the report and the diff tell them apart: its device track, name and program key."""

    device: str
    name: str
    program: str | None = None  # hex key of the launched program, where the profile has them (tinygrad 0.14+)

    def label(self, key_digits: int = 8) -> str:
        return f"{self.name} [{self.program[:key_digits]}]" if self.program else self.name


@dataclass
class Runs:
    """The launches of one kernel: start times and durations (ns), in time order."""

    kernel: KernelId
    category: str
    role: Role
    ts: np.ndarray
    dur: np.ndarray

    @property
    def total_ns(self) -> int:
        return int(self.dur.sum())

    @property
    def count(self) -> int:
        return len(self.dur)


def columns(t: Track) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A slice track's starts, durations and name ids as numpy arrays (views: no copy)."""
    return (np.frombuffer(t.ts, np.int64), np.frombuffer(t.dur, np.int64),
            np.frombuffer(t.names, f"i{t.names.itemsize}"))


def program_uops(log: RewriteLog | None) -> dict[str, Sequence[str]]:
    """The final UOp list of each codegen context's program by program key (hex) and by name (a later context
    wins, as the viewers link them): what analysis.category needs to see tensor-core kernels."""
    out: dict[str, Sequence[str]] = {}
    for c in log.contexts if log is not None else ():
        if c.program:
            for k in c.key.keys:
                out[k.hex() if isinstance(k, bytes) else k] = c.program
            out[c.key.name] = c.program
    return out


def kernel_runs(tl: Timeline, uops: Mapping[str, Sequence[str]] | None = None, by_program: bool = True
                ) -> list[Runs]:
    """Launches with a duration on device tracks (queues and copy engines; lanes of one name together), grouped by
    (track name, kernel name, program key if `by_program`), longest total first."""
    parts: dict[KernelId, list[tuple[np.ndarray, np.ndarray]]] = {}
    roles: dict[KernelId, Role] = {}
    for t in device_tracks(tl):
        ts, dur, names = columns(t)
        codes = _codes(t) if by_program else {}
        base = len(codes) + 1
        keys = names.astype(np.int64) * base
        for i, a in t.args.items():
            p = a.get(ARG_PROGRAM) if by_program else None
            if p is not None:
                keys[i] += codes[p]
        keep = dur > 0
        uniq, inverse = np.unique(keys[keep], return_inverse=True)
        order = np.argsort(inverse, kind="stable")
        bounds = np.searchsorted(inverse[order], np.arange(len(uniq) + 1))
        kts, kdur = ts[keep][order], dur[keep][order]
        program = {c: p for p, c in codes.items()}
        for g, key in enumerate(uniq.tolist()):
            name, code = divmod(key, base)
            kid = KernelId(t.name, tl.strings[name], program.get(code))
            parts.setdefault(kid, []).append((kts[bounds[g]:bounds[g + 1]], kdur[bounds[g]:bounds[g + 1]]))
            roles[kid] = t.role
    out = []
    for kid, chunks in parts.items():
        ts = np.concatenate([c[0] for c in chunks])
        dur = np.concatenate([c[1] for c in chunks])
        order = np.argsort(ts, kind="stable")
        u = (uops or {}).get(kid.program or "") or (uops or {}).get(kid.name)
        out.append(Runs(kid, category(kid.name, roles[kid], u), roles[kid], ts[order], dur[order]))
    return sorted(out, key=lambda r: (-r.total_ns, r.kernel.device, r.kernel.name, r.kernel.program or ""))


def _codes(t: Track) -> dict[str, int]:
    """Program key → a small code (1, 2, …) in order of first launch on the track."""
    out: dict[str, int] = {}
    for a in t.args.values():
        p = a.get(ARG_PROGRAM)
        if p is not None and p not in out:
            out[p] = len(out) + 1
    return out
