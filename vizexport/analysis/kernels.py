"""Top kernels of a run (like tinygrad's `viz.cli -t`) with their launches, from a Timeline."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from ..timeline import ARG_GBS_MEM, ARG_GFLOPS, ARG_PROGRAM, Role, Timeline, Track


@dataclass
class Kernel:
    name: str
    device: str
    program: str | None = None  # the program's key (hex), when kernels are told apart by program
    count: int = 0
    total_ns: int = 0
    pct: float = 0.0
    launches: list[dict] = field(default_factory=list)  # ts, dur, args of each launch (capped)
    flops_ns: float = 0.0  # Σ GFLOPS·dur, for time-weighted means
    mem_ns: float = 0.0
    weighted_ns: int = 0

    @property
    def gflops(self) -> float | None:
        return self.flops_ns / self.weighted_ns if self.weighted_ns else None

    @property
    def gbs(self) -> float | None:
        return self.mem_ns / self.weighted_ns if self.weighted_ns else None


def device_tracks(tl: Timeline) -> list[Track]:
    """The slice tracks of work devices ran: queues and copy engines."""
    return [t for t in tl.tracks if t.role in (Role.QUEUE, Role.COPY)]


def top_kernels(tl: Timeline, max_launches: int = 200, by_program: bool = False) -> list[Kernel]:
    """Kernels and copies aggregated by (device string, name), longest total time first; % of that device's time.
    `by_program`: one entry per launched program (its key, where the profile has them: one name may cover several
    programs), else per name as tinygrad's `viz.cli -t` counts them."""
    kernels: dict[tuple[str, str, str | None], Kernel] = {}
    device_ns: dict[str, int] = defaultdict(int)
    for t in device_tracks(tl):
        for i in range(len(t)):
            d = t.dur[i]
            if d <= 0:
                continue
            name = tl.strings[t.names[i]]
            args = t.args.get(i, {})
            key = (t.name, name, args.get(ARG_PROGRAM) if by_program else None)
            k = kernels.get(key)
            if k is None:
                k = kernels[key] = Kernel(name, t.name, key[2])
            k.count += 1
            k.total_ns += d
            device_ns[t.name] += d
            if ARG_GFLOPS in args:
                k.flops_ns += args[ARG_GFLOPS] * d
                k.mem_ns += args.get(ARG_GBS_MEM, 0.0) * d
                k.weighted_ns += d
            if len(k.launches) < max_launches:
                k.launches.append({"ts": t.ts[i], "dur": d, "track": t.name, "args": args})
    for k in kernels.values():
        k.pct = 100.0 * k.total_ns / device_ns[k.device] if device_ns[k.device] else 0.0
    return sorted(kernels.values(), key=lambda k: (-k.total_ns, k.device, k.name, k.program or ""))
