"""Make an N-event profile.pkl by repeating a real tinygrad 0.14.0 NULL-device profile with shifted timestamps.

Runs inside a tinygrad 0.14.0 venv (tools/tgvenv.py): the events are tinygrad's own classes, pickled by tinygrad's
pickler, exactly as a long run would write them. Buffer and exec keys are renumbered per repetition so every
alloc/free pair stays unique.

Usage: <venv python> benchmarks/make_big_profile.py SOURCE.pkl N OUT.pkl
"""
import dataclasses
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


def main() -> None:
    src, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    with open(src, "rb") as f:
        base = pickle.load(f)
    once = [e for e in base if not isinstance(e, ProfileDeviceEvent)]
    devices = [e for e in base if isinstance(e, ProfileDeviceEvent)]
    times = [t for e in once for t in (getattr(e, "st", None), getattr(e, "en", None), getattr(e, "ts", None)) if t]
    period = max(times) - min(times) + Decimal(1000)
    key_stride = 1 + max((e.key for e in once if isinstance(e, ProfilePointEvent) and isinstance(e.key, int)),
                         default=0)
    events, rep = [], 0
    while len(events) + len(devices) < n:
        events.extend(shifted(e, period * rep, rep, key_stride) for e in once)
        rep += 1
    events = events[: n - len(devices)] + devices
    with open(out, "wb") as f:
        pickle.dump(events, f)
    print(f"{out}: {len(events)} events from {rep} repetitions of {src}")


if __name__ == "__main__":
    main()
