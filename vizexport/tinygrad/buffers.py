"""Buffer lifetimes: one slice per allocation on a `<device> Buffers` track, as tinygrad's viewer draws memory buffer
by buffer and lists the kernels that used each.

A lifetime runs from the `alloc` point to the first `free` of its key, or to the end of the profile (the viewer's
end: the last event). An allocation of a key that is still live never ends either, as in Profile.memory, whose
counter takes away only what the latest alloc of a key added: so at any time the sizes of the lifetimes open then
add up to the `<device> Memory` counter. The users of a buffer are, as in the viewer, the exec events on the
buffer's own device that name its key before it is freed (copies name [destination, source]).
"""
from __future__ import annotations

from array import array
from collections import defaultdict
from itertools import chain
from typing import Any, NamedTuple

import numpy as np

from ..records import Alloc, Exec, Profile
from ..units import bytes_text

_KINDS = frozenset({"alloc", "free", "exec"})  # the points lifetimes read
MAX_USERS = 256  # users listed per buffer: a weight read by every step of a long run would make args of megabytes


class Lifetimes(NamedTuple):
    """One device's lifetimes, sorted by (start, -end), as columns (made in a forked process, they travel as they
    are). Each one's users are rows of `users` from its entry in `first_user` to the next one's."""

    alloc: np.ndarray  # its alloc point (an index into Profile.points)
    st: np.ndarray
    en: np.ndarray
    n_users: np.ndarray  # how many exec events used it
    users: np.ndarray  # (exec point, the buffer's position in its bufs) of the first MAX_USERS users: n × 2
    first_user: np.ndarray  # len + 1 offsets into `users`


def profile_end(prof: Profile) -> int:
    """The last time any event of the profile reaches."""
    ends = prof.spans.en  # a never-ended span's is its start
    return max(int(ends.max()) if len(ends) else 0, max((pt.ts for pt in prof.points), default=0))


class _Made:
    """A device's lifetimes as allocated: columns filled as the points come."""

    def __init__(self) -> None:
        self.alloc, self.st, self.en = array("q"), array("q"), array("q")
        self.users: list[list[tuple[int, int]]] = []

    def add(self, i: int, st: int, en: int) -> int:
        self.alloc.append(i)
        self.st.append(st)
        self.en.append(en)
        self.users.append([])
        return len(self.users) - 1

    def columns(self) -> Lifetimes:
        alloc, st, en = (np.frombuffer(c, np.int64) for c in (self.alloc, self.st, self.en))
        order = np.lexsort((-en, st))
        listed = [self.users[k] for k in order.tolist()]
        n_users = np.fromiter(map(len, listed), np.int64, len(listed))
        first = np.zeros(len(listed) + 1, np.int64)
        np.cumsum(np.minimum(n_users, MAX_USERS), out=first[1:])
        users = np.fromiter(chain.from_iterable(chain.from_iterable(u if len(u) <= MAX_USERS else u[:MAX_USERS]
                                                                    for u in listed)), np.int64, 2 * int(first[-1]))
        return Lifetimes(alloc[order], st[order], en[order], n_users, users.reshape(-1, 2), first)


def lifetimes(prof: Profile) -> dict[str, Lifetimes]:
    """Per device, the lifetime of every allocation."""
    end, points = profile_end(prof), prof.points
    made: dict[str, _Made] = defaultdict(_Made)
    live: dict[str, dict[Any, int]] = defaultdict(dict)  # device → key → its latest allocation's lifetime
    users: dict[str, dict[Any, list[tuple[int, int]]]] = defaultdict(lambda: defaultdict(list))  # device → key → …
    kept = [i for i, pt in enumerate(points) if pt.kind in _KINDS]
    by_time = np.argsort(np.fromiter((points[i].ts for i in kept), np.int64, len(kept)), kind="stable")
    for i in np.array(kept, np.int64)[by_time].tolist():
        pt = points[i]
        if pt.kind == "exec":
            if isinstance(pt.arg, Exec):
                mine = users[pt.device]
                for n, b in enumerate(pt.arg.bufs):
                    mine[b].append((i, n))
        elif pt.kind == "alloc":
            if isinstance(pt.arg, Alloc):
                live[pt.device][pt.key] = made[pt.device].add(i, pt.ts, end)
        elif (at := live[pt.device].pop(pt.key, None)) is not None:
            m = made[pt.device]
            m.en[at], m.users[at] = pt.ts, users[pt.device].pop(pt.key, [])
    for dev, keys in live.items():
        for k, at in keys.items():
            made[dev].users[at] = users[dev].get(k, [])
    return {dev: m.columns() for dev, m in made.items()}


def slices(prof: Profile, found: Lifetimes) -> tuple[list[tuple[int, str]], list[dict]]:
    """Per lifetime in order: what names its slice ((bytes, dtype): buffers of both share a name), and its args."""
    points = prof.points
    pairs = found.users.tolist()
    execs = [points[u] for u, _ in pairs]
    listed = {name: " ".join(name.split()) for name in {e.arg.name for e in execs}}  # as users list it (a few hundred)
    users = [{"exec": e.key, "name": listed[e.arg.name], "mode": e.arg.mode(n)}
             for e, (_, n) in zip(execs, pairs, strict=True)]
    allocs = [points[i] for i in found.alloc.tolist()]
    first = found.first_user.tolist()
    args = [{"buf": pt.key, "bytes": pt.arg.nbytes, "dtype": pt.arg.dtype, "count": pt.arg.count,
             "users": users[at:to]} for pt, at, to in zip(allocs, first[:-1], first[1:], strict=True)]
    for k in np.flatnonzero(found.n_users > MAX_USERS).tolist():
        args[k]["users (all)"] = int(found.n_users[k])
    return [(pt.arg.nbytes, pt.arg.dtype) for pt in allocs], args


def slice_name(nbytes: int, dtype: str) -> str:
    """The name of a buffer's slice."""
    return f"{bytes_text(nbytes)} {dtype}".rstrip()
