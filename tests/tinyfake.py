"""Pickles shaped like tinygrad's, written without tinygrad: objects of look-alike classes that pickle under
tinygrad's module and class names (NEWOBJ + BUILD of their __dict__, as tinygrad's dataclasses do), so that tests can
craft profiles and rewrites traces with any field set to anything."""
from __future__ import annotations

import io
import pickle
from decimal import Decimal
from typing import Any

MODULES = {"ProfileRangeEvent": "tinygrad.helpers", "ProfilePointEvent": "tinygrad.helpers",
           "TracingKey": "tinygrad.helpers", "ProfileDeviceEvent": "tinygrad.device",
           "ProfileGraphEvent": "tinygrad.device", "ProfileGraphEntry": "tinygrad.device",
           "ProfileProgramEvent": "tinygrad.device", "DType": "tinygrad.dtype", "UOp": "tinygrad.uop.ops",
           "TrackedGraphRewrite": "tinygrad.uop.ops", "Ops": "tinygrad.uop", "RewriteTrace": "tinygrad.uop.ops",
           "TrackedRewriteContext": "tinygrad.ops", "ProfileSQTTEvent": "tinygrad.runtime.ops_amd"}


def Fake(cls: str, /, *args: Any, **fields: Any) -> Any:
    """An object pickled as tinygrad's class `cls` with `fields` as its state (NEWOBJ + BUILD); with `args`, as
    REDUCE(cls, args) instead (UOp, DType, enums)."""
    obj = object.__new__(_fake_class(cls, bool(args)))
    obj.__dict__.update({"fake_args": args} if args else fields)
    return obj


def _reduce(self: Any) -> tuple:
    return type(self), self.fake_args


_classes: dict[tuple[str, bool], type] = {}


def _fake_class(name: str, reduced: bool) -> type:
    cls = _classes.get((name, reduced))
    if cls is None:
        attrs = {"__module__": MODULES[name], "__qualname__": name, **({"__reduce__": _reduce} if reduced else {})}
        cls = _classes[(name, reduced)] = type(name, (), attrs)
    return cls


class _Pickler(pickle._Pickler):  # the pure-Python pickler lets us name classes that cannot be imported here
    def save_global(self, obj: Any, name: str | None = None) -> None:
        if obj in _classes.values():
            self.save(obj.__module__)
            self.save(obj.__name__)
            self.write(pickle.STACK_GLOBAL)
            self.memoize(obj)
            return
        super().save_global(obj, name)


def dumps(obj: Any) -> bytes:
    out = io.BytesIO()
    _Pickler(out, protocol=4).dump(obj)
    return out.getvalue()


def us(x: float) -> Decimal:
    return Decimal(f"{x:.3f}")


def span(device: str = "NULL", name: Any = "E_4", st: Any = 1.0, en: Any = 2.0, **kw: Any) -> Fake:
    return Fake("ProfileRangeEvent", device=device, name=name, st=us(st) if isinstance(st, float) else st,
                en=us(en) if isinstance(en, float) else en, profile_key=kw.pop("profile_key", None), **kw)


def point(name: str, ts: float, key: Any = None, arg: Any = None, device: str = "NULL") -> Fake:
    return Fake("ProfilePointEvent", device=device, name=name, key=key, arg={} if arg is None else arg, ts=us(ts))


def profile(*events: Fake) -> bytes:
    """A 0.14-shaped profile: the events plus a device event."""
    return dumps([*events, Fake("ProfileDeviceEvent", device="NULL", tdiff=Decimal(0), props=None)])
