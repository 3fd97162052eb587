"""Top kernels of a run (like tinygrad's `viz.cli -t`) with their first launches, for the site's kernel list and
pages: analysis.launches's grouping, with each launch's args."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..timeline import Timeline
from .launches import Runs, device_ns, kernel_runs


@dataclass
class Kernel:
    name: str
    device: str
    program: str | None = None  # the program's key (hex), when kernels are told apart by program
    count: int = 0
    total_ns: int = 0
    pct: float = 0.0
    launches: list[dict] = field(default_factory=list)  # ts, dur, track, args of each launch (capped)
    gflops: float | None = None  # time-weighted over the launches with estimates
    gbs: float | None = None
    key: bytes | None = None  # the program's key (`program` is its hex text)


def top_kernels(tl: Timeline, max_launches: int = 200, by_program: bool = False) -> list[Kernel]:
    """Kernels and copies aggregated by (device string, name), longest total time first; % of that device's time.
    `by_program`: one entry per launched program (its key, where the profile has them: one name may cover several
    programs), else per name as tinygrad's `viz.cli -t` counts them."""
    runs = kernel_runs(tl, by_program=by_program)
    totals = device_ns(runs)
    return [Kernel(r.kernel.name, r.kernel.device, r.kernel.program, r.count, r.total_ns,
                   100.0 * r.total_ns / totals[r.kernel.device], _launches(r, max_launches), r.gflops, r.gbs,
                   r.kernel.key)
            for r in runs]


def _launches(r: Runs, n: int) -> list[dict]:
    """The first `n` launches, track by track."""
    out: list[dict] = []
    for t, index in r.where:
        out += [{"ts": t.ts[i], "dur": t.dur[i], "track": t.name, "args": t.args.get(i, {})}
                for i in index[:n - len(out)].tolist()]
    return out
