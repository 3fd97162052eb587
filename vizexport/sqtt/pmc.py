"""AMD performance counters (`ProfilePMCEvent`, sqtt-format.md §12): per-counter values, sums, derived utilisation.

The blob is an array of little-endian u64. Each `PMCSample` of `sched` names one counter and its slice of the blob:
`size` bytes at `off`, values in nested order xcc, inst, se, sa, wgp (outermost first). Derived figures follow
tinygrad's viewer: "VALU utilization" = 100·(SQ_INSTS_VALU sum / its count) / (GRBM_GUI_ACTIVE max · 4), same for SALU.
"""
from __future__ import annotations

import itertools
import struct
from dataclasses import dataclass, field
from typing import Any

from ..records import Capture, PMCSample, Profile
from .launches import Launch, find_launches

DERIVED = {"VALU utilization": "SQ_INSTS_VALU", "SALU utilization": "SQ_INSTS_SALU"}


@dataclass
class Counter:
    name: str
    block: str
    dims: tuple[int, int, int, int, int]  # xcc, inst, se, sa, wgp
    values: list[int] = field(default_factory=list)

    @property
    def sum(self) -> int:
        return sum(self.values)

    @property
    def max(self) -> int:
        return max(self.values, default=0)

    @property
    def count(self) -> int:
        return len(self.values)

    def rows(self) -> list[tuple]:
        """(xcc, inst, se, sa, [value per wgp]) for every sample position, as tinygrad's viewer lists them."""
        x, i, e, a, w = self.dims
        pos = itertools.product(range(x), range(i), range(e), range(a))
        return [(*p, self.values[n * w:(n + 1) * w]) for n, p in enumerate(pos)]


@dataclass
class PMC:
    counters: list[Counter]
    derived: dict[str, float]  # percent
    error: str | None = None  # the blob was shorter than the schedule says (values past its end are missing)

    def sums(self) -> dict[str, int]:
        return {c.name: c.sum for c in self.counters}


def _dims(s: PMCSample) -> tuple[int, int, int, int, int]:
    return tuple(max(int(v or 0), 0) for v in (s.xcc, s.inst, s.se, s.sa, s.wgp))  # type: ignore[return-value]


def decode_pmc(cap: Capture) -> PMC:
    """Counters of one PMC record; never raises on a short or odd blob (see PMC.error)."""
    blob, out, error = bytes(cap.blob or b""), [], None
    for s in cap.sched:
        dims = _dims(s)
        n = dims[0] * dims[1] * dims[2] * dims[3] * dims[4]
        off = int(s.off or 0)
        have = max(min(n, (len(blob) - off) // 8), 0) if off >= 0 else 0
        if have < n:
            error = f"PMC blob of {len(blob)} bytes ends inside counter {s.name}"
        values = list(struct.unpack_from(f"<{have}Q", blob, off)) if have else []
        out.append(Counter(s.name, s.block, dims, values))
    return PMC(out, derived(out), error)


def derived(counters: list[Counter]) -> dict[str, float]:
    by = {c.name: c for c in counters}
    gui = by.get("GRBM_GUI_ACTIVE")
    out = {}
    for name, src in DERIVED.items():
        c = by.get(src)
        if c is not None and c.count and gui is not None and gui.max:
            out[name] = round(100 * (c.sum / c.count) / (gui.max * 4), 1)
    return out


def launch_counters(prof: Profile, launches: list[Launch] | None = None) -> list[dict[str, Any]]:
    """One row per launch with a PMC record: kernel, run, ids, counter sums/max/count, derived utilisation (%)."""
    rows = []
    for la in launches if launches is not None else find_launches(prof):
        if la.pmc is None:
            continue
        pmc = decode_pmc(la.pmc)
        row: dict[str, Any] = {"device": la.device, "kernel": la.name, "run": la.run, "kern": la.kern,
                               "exec_tag": la.exec_tag,
                               "counters": {c.name: {"sum": c.sum, "max": c.max, "count": c.count}
                                            for c in pmc.counters},
                               "derived": pmc.derived}
        if pmc.error:
            row["error"] = pmc.error
        rows.append(row)
    return rows


def span_args(prof: Profile, launches: list[Launch] | None = None) -> dict[int, dict[str, Any]]:
    """Args for kernel slices, keyed by index into prof.spans: {"pmc": {counter: sum, …, "VALU utilization %": …}}."""
    out = {}
    for la in launches if launches is not None else find_launches(prof):
        if la.pmc is None or la.span_row is None:
            continue
        pmc = decode_pmc(la.pmc)
        args: dict[str, Any] = dict(pmc.sums())
        args.update({f"{k} %": v for k, v in pmc.derived.items()})
        out[la.span_row] = {"pmc": args}
    return out
