"""Buffer lifetimes: one slice per allocation on a `<device> Buffers` track, as tinygrad's viewer draws memory buffer
by buffer and lists the kernels that used each.

A lifetime runs from the `alloc` point to the first `free` of its key, or to the end of the profile (the viewer's
end: the last event). An allocation of a key that is still live never ends either, as in Profile.memory, whose
counter takes away only what the latest alloc of a key added: so at any time the sizes of the lifetimes open then
add up to the `<device> Memory` counter. The users of a buffer are, as in the viewer, the exec events on the
buffer's own device that name its key before it is freed (copies name [destination, source]).
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from ..records import Alloc, Exec, Profile
from ..units import bytes_text

_KINDS = frozenset({"alloc", "free", "exec"})  # the points lifetimes read
MAX_USERS = 256  # users listed per buffer: a weight read by every step of a long run would make args of megabytes


@dataclass(slots=True)  # a long run's hundreds of thousands
class Lifetime:
    device: str
    key: Any
    st: int
    en: int
    alloc: Alloc
    users: list[dict] = field(default_factory=list)
    n_users: int = 0

    def name(self) -> str:
        return f"{bytes_text(self.alloc.nbytes)} {self.alloc.dtype}".rstrip()

    def args(self) -> dict:
        a = self.alloc
        out: dict = {"buf": self.key, "bytes": a.nbytes, "dtype": a.dtype, "count": a.count, "users": self.users}
        if self.n_users > len(self.users):
            out["users (all)"] = self.n_users
        return out


def profile_end(prof: Profile) -> int:
    """The last time any event of the profile reaches."""
    ends = prof.spans.en  # a never-ended span's is its start
    return max(int(ends.max()) if len(ends) else 0, max((pt.ts for pt in prof.points), default=0))


def lifetimes(prof: Profile) -> dict[str, list[Lifetime]]:
    """Per device, the lifetime of every allocation, sorted by (start, -end)."""
    end = profile_end(prof)
    out: dict[str, list[Lifetime]] = defaultdict(list)
    live: dict[tuple[str, Any], Lifetime] = {}
    users: dict[tuple[str, Any], list[tuple[Any, Exec, int]]] = defaultdict(list)
    names: dict[str, str] = {}  # exec name → as users list it (a run launches a few hundred kernels many times)
    for pt in sorted((pt for pt in prof.points if pt.kind in _KINDS), key=attrgetter("ts")):
        if pt.kind == "exec":
            if isinstance(pt.arg, Exec):
                for n, b in enumerate(pt.arg.bufs):
                    users[(pt.device, b)].append((pt.key, pt.arg, n))
        elif pt.kind == "alloc":
            if isinstance(pt.arg, Alloc):
                live[(pt.device, pt.key)] = lt = Lifetime(pt.device, pt.key, pt.ts, end, pt.arg)
                out[pt.device].append(lt)
        elif (k := (pt.device, pt.key)) in live:
            lt = live.pop(k)
            lt.en = pt.ts
            _set_users(lt, users.pop(k, []), names)
    for k, lt in live.items():
        _set_users(lt, users.get(k, []), names)
    for v in out.values():
        v.sort(key=lambda lt: (lt.st, -lt.en))
    return dict(out)


def _set_users(lt: Lifetime, found: list[tuple[Any, Exec, int]], names: dict[str, str]) -> None:
    lt.n_users = len(found)
    for key, e, n in found[:MAX_USERS]:
        name = names.get(e.name)
        if name is None:
            name = names[e.name] = " ".join(e.name.split())
        lt.users.append({"exec": key, "name": name, "mode": e.mode(n)})
