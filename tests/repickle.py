"""Rewrite a real profile.pkl through vizexport's own reader: load it into stand-ins (vizexport.pickles), change
fields, and pickle the stand-ins back under their tinygrad class names (NEWOBJ/REDUCE + BUILD, as tinygrad's own
pickles are made), so that the whole command path reads the result as it reads tinygrad's files.

`slow_down` makes one kernel program's launches N times longer: range events get a later end, JIT graph entries a
new end signal — a pair of real runs that differ in exactly one kernel."""
from __future__ import annotations

import copyreg
import io
import pickle
from decimal import Decimal
from pathlib import Path
from typing import Any

from vizexport.pickles import EnumValue, FloatStub, Stub, class_name, load


class _Pickler(pickle._Pickler):  # the pure-Python pickler: classes are named by their stand-in's tinygrad name
    def reducer_override(self, obj: Any) -> Any:
        cls = type(obj)
        if isinstance(obj, EnumValue):
            return cls, (int(obj),)
        if isinstance(obj, FloatStub):
            return copyreg.__newobj__, (cls, float(obj)), (None, dict(obj.__dict__)) if obj.__dict__ else None
        if isinstance(obj, Stub):
            state = {k: v for k, v in obj.__dict__.items() if k != "_args"} or None
            if "_args" in obj.__dict__:
                return cls, obj._args, state
            return copyreg.__newobj__, (cls,), state
        return NotImplemented

    def save_global(self, obj: Any, name: str | None = None) -> None:
        qual = getattr(obj, "_qualname", None)
        if qual is None:
            super().save_global(obj, name)
            return
        module, _, cls = qual.rpartition(".")
        self.save(module)
        self.save(cls)
        self.write(pickle.STACK_GLOBAL)
        self.memoize(obj)


def dumps(obj: Any) -> bytes:
    out = io.BytesIO()
    _Pickler(out, protocol=4).dump(obj)
    return out.getvalue()


def _later(st: str, en: str, factor: float) -> str:
    """An end `factor` times as far from the start (timestamps are Decimal µs, read as their text)."""
    s, e = Decimal(st), Decimal(en)
    return str(s + (e - s) * Decimal(str(factor)))


def slow_down(src: Path, dst: Path, program: bytes | set[bytes], factor: float = 2.0) -> int:
    """Write `src` to `dst` with every launch of `program` (its profile_key, or any of a set of them) `factor` times
    longer; returns how many launches changed."""
    events, _ = load(src)
    programs = program if isinstance(program, set) else {program}
    changed = 0
    for e in events:
        kind = class_name(e)
        if kind == "ProfileRangeEvent" and getattr(e, "profile_key", None) in programs and e.en is not None:
            e.en = _later(e.st, e.en, factor)
            changed += 1
        elif kind == "ProfileGraphEvent":
            for ent in e.ents:
                if getattr(ent, "profile_key", None) in programs:
                    e.sigs.append(_later(e.sigs[ent.st_id], e.sigs[ent.en_id], factor))
                    ent.en_id = len(e.sigs) - 1
                    changed += 1
    dst.write_bytes(dumps(events))
    return changed
