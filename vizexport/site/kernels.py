"""What the index page shows about a run: top kernels (like tinygrad's `viz.cli -t`) and per-kernel launches."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from ..timeline import Timeline, Track


@dataclass
class Kernel:
    name: str
    device: str
    count: int = 0
    total_ns: int = 0
    pct: float = 0.0
    launches: list[dict] = field(default_factory=list)  # ts, dur, args of each launch (capped)
    flops_ns: float = 0.0  # Σ GFLOPS·dur, for time-weighted means
    mem_ns: float = 0.0
    weighted_ns: int = 0
    page: str = ""  # set by the site builder
    ctx: dict | None = None  # codegen context, when the rewrites trace has it

    @property
    def gflops(self) -> float | None:
        return self.flops_ns / self.weighted_ns if self.weighted_ns else None

    @property
    def gbs(self) -> float | None:
        return self.mem_ns / self.weighted_ns if self.weighted_ns else None


def device_tracks(tl: Timeline) -> list[tuple[str, Track]]:
    """(root name, track) of every device queue / engine slice track: the slice tracks right under a device root
    (not host roots, Graph, Memory or Markers, nor the deeper SQTT tracks)."""
    out = []
    for t in tl.tracks:
        path = tl.path(t)
        if t.kind == "slice" and len(path) == 2 and not t.name.endswith(" Graph") and \
                path[0].name not in ("TINY", "USER", "GC"):
            out.append((path[0].name, t))
    return out


def top_kernels(tl: Timeline, max_launches: int = 200) -> list[Kernel]:
    """Kernels and copies aggregated by (device string, name), longest total time first; % of that device's time."""
    kernels: dict[tuple[str, str], Kernel] = {}
    device_ns: dict[str, int] = defaultdict(int)
    for _, t in device_tracks(tl):
        for i in range(len(t)):
            d = t.dur[i]
            if d <= 0:
                continue
            name = tl.strings[t.names[i]]
            k = kernels.get((t.name, name))
            if k is None:
                k = kernels[(t.name, name)] = Kernel(name, t.name)
            args = t.args.get(i, {})
            k.count += 1
            k.total_ns += d
            device_ns[t.name] += d
            if "GFLOPS" in args:
                k.flops_ns += args["GFLOPS"] * d
                k.mem_ns += args.get("GB/s mem", 0.0) * d
                k.weighted_ns += d
            if len(k.launches) < max_launches:
                k.launches.append({"ts": t.ts[i], "dur": d, "track": t.name, "args": args})
    for k in kernels.values():
        k.pct = 100.0 * k.total_ns / device_ns[k.device] if device_ns[k.device] else 0.0
    return sorted(kernels.values(), key=lambda k: (-k.total_ns, k.device, k.name))
