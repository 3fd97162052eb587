"""Make an N-event profile.pkl by repeating a real tinygrad 0.14.0 NULL-device profile with shifted timestamps.

Runs inside a tinygrad 0.14.0 venv (tools/tgvenv.py): the events are tinygrad's own classes, pickled by tinygrad's
pickler, exactly as a long run would write them. Buffer and exec keys are renumbered per repetition so every
alloc/free pair stays unique.

Above 2,000,000 events (or with --incremental) the list is never built: a pure-Python pickler writes the same
stream (protocol 4, one top-level list in APPENDS batches of 1000, shared objects fetched from the memo) from a
generator, and forgets each batch's fresh objects once written. Pickling 20M events with `pickle.dump` would need
about as much memory as loading them (~19 GiB).

Usage: <venv python> benchmarks/make_big_profile.py SOURCE.pkl N OUT.pkl [--incremental]
"""
import dataclasses
import itertools
import pickle
import sys
from decimal import Decimal

from tinygrad.device import ProfileDeviceEvent, ProfileGraphEvent
from tinygrad.helpers import ProfilePointEvent, ProfileRangeEvent


def shifted(e, dt: Decimal, rep: int, key_stride: int):
    if isinstance(e, ProfileRangeEvent):
        return dataclasses.replace(e, st=e.st + dt, en=None if e.en is None else e.en + dt)
    if isinstance(e, ProfilePointEvent):
        key = e.key + rep * key_stride if isinstance(e.key, int) and e.name in ("alloc", "free", "exec") else e.key
        arg = e.arg
        if e.name == "exec":
            arg = {**arg, "bufs": [b + rep * key_stride for b in arg["bufs"]]}
        if e.name == "marker":
            arg = {**arg, "name": f"{arg['name']} #{rep}"}
        return dataclasses.replace(e, ts=e.ts + dt, key=key, arg=arg)
    if isinstance(e, ProfileGraphEvent):
        return dataclasses.replace(e, sigs=[s + dt for s in e.sigs])
    return e


def generate(src: str, n: int):
    """(number of repetitions, iterator over the n events: shifted copies, then the device events)."""
    with open(src, "rb") as f:
        base = pickle.load(f)
    once = [e for e in base if not isinstance(e, ProfileDeviceEvent)]
    devices = [e for e in base if isinstance(e, ProfileDeviceEvent)]
    times = [t for e in once for t in (getattr(e, "st", None), getattr(e, "en", None), getattr(e, "ts", None)) if t]
    period = max(times) - min(times) + Decimal(1000)
    key_stride = 1 + max((e.key for e in once if isinstance(e, ProfilePointEvent) and isinstance(e.key, int)),
                         default=0)
    reps = -(-(n - len(devices)) // len(once))
    events = (shifted(e, period * rep, rep, key_stride) for rep in range(reps) for e in once)
    return reps, base, itertools.chain(itertools.islice(events, n - len(devices)), devices)


class _Memo(dict):
    """The pickler's memo, numbered by a running count so entries can be forgotten without reusing numbers."""

    count = 0

    def __len__(self) -> int:
        return self.count

    def __setitem__(self, key, value) -> None:
        super().__setitem__(key, value)
        self.count += 1


class _Events:
    """A list that exists only as a generator."""

    def __init__(self, it):
        self.it = it


class _LazyPickler(pickle._Pickler):
    def __init__(self, f, keep: set[int]):
        super().__init__(f, protocol=4)
        self.memo, self.keep = _Memo(), keep
        self.dispatch = {**pickle._Pickler.dispatch, _Events: _LazyPickler.save_events}

    def save_events(self, obj: _Events) -> None:
        """Exactly what save_list + _batch_appends write for a list, one batch in memory at a time."""
        self.write(pickle.EMPTY_LIST)
        self.memoize(obj)
        while batch := list(itertools.islice(obj.it, self._BATCHSIZE)):
            before = set(self.memo)
            if len(batch) > 1:
                self.write(pickle.MARK)
                for x in batch:
                    self.save(x)
                self.write(pickle.APPENDS)
            else:
                self.save(batch[0])
                self.write(pickle.APPEND)
            for k in set(self.memo) - before - self.keep:  # fresh objects of this batch: never referenced again
                if not isinstance(self.memo[k][1], type):  # classes stay, as in one big pickle.dump
                    dict.__delitem__(self.memo, k)


def _ids(objs) -> set[int]:
    """ids of everything reachable from the source profile (shared by every repetition, so kept in the memo)."""
    seen, stack = set(), list(objs)
    while stack:
        o = stack.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        if isinstance(o, dict):
            stack.extend(o.keys()), stack.extend(o.values())
        elif isinstance(o, (list, tuple, set, frozenset)):
            stack.extend(o)
        elif hasattr(o, "__dict__"):
            stack.append(o.__dict__)
    return seen


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    src, n, out = args[0], int(args[1]), args[2]
    reps, base, events = generate(src, n)
    with open(out, "wb") as f:
        if "--incremental" in sys.argv or n > 2_000_000:
            p = _LazyPickler(f, _ids(base))
            p.write(pickle.PROTO + b"\x04")  # as Pickler.dump: the protocol, then frames
            p.framer.start_framing()
            p.save(_Events(events))
            p.write(pickle.STOP)
            p.framer.end_framing()
        else:
            pickle.dump(list(events), f)
    print(f"{out}: {n} events from {reps} repetitions of {src}")


if __name__ == "__main__":
    main()
