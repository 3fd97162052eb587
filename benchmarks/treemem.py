"""The memory a command's whole process tree holds: its processes' PSS summed (a forked worker's pages shared with its
parent count once, split between them; those either side wrote since the fork count for that side alone), sampled
in a thread while the command runs. Peak RSS of one process misses its workers; summed RSS counts shared pages
once per process."""
import os
import threading
from pathlib import Path

INTERVAL = 0.25  # seconds between samples


def descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                kids = [int(x) for x in Path(f"/proc/{p}/task/{task}/children").read_text().split()]
                out += kids
                todo += kids
        except (OSError, ValueError):  # it ended meanwhile
            continue
    return out


def rollup(pid: int, fields: tuple[str, ...]) -> int:
    """The sum of these smaps_rollup fields of a process, in bytes (0 once it has ended)."""
    try:
        return sum(int(line.split()[1]) * 1024 for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()
                   if line.startswith(fields))
    except (OSError, ValueError):
        return 0


class TreePss:
    """`with TreePss() as m: run a child`: m.peak is the most its descendants' PSS summed to (bytes), None where
    /proc has no smaps_rollup."""

    def __init__(self) -> None:
        self.peak: int | None = 0 if Path(f"/proc/{os.getpid()}/smaps_rollup").exists() else None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        me = os.getpid()
        while not self._stop.wait(INTERVAL):
            self.peak = max(self.peak, sum(rollup(p, ("Pss:",)) for p in descendants(me)))

    def __enter__(self) -> "TreePss":
        if self.peak is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self.peak is not None:
            self._thread.join()
