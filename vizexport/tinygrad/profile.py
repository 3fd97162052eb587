"""profile.pkl (a list of Profile* stand-ins, any release 0.10.1 … master) → records.Profile."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from .. import pickles
from ..pickles import InputError, class_name
from ..records import (
    Alloc,
    Capture,
    DeviceInfo,
    Exec,
    GraphBatch,
    Key,
    Marker,
    PMCSample,
    Point,
    Profile,
    Program,
    Release,
    Span,
)
from .common import as_key, dtype_bits, dtype_name, ns, strip_ansi
from .releases import profile_release, uop_leaf, with_override

EMPTY = Release("unknown", "ambiguous", "empty profile: nothing to tell the release by")


def load_profile(path: str | Path, tinygrad_version: str | None = None) -> Profile:
    """Read a tinygrad profile.pkl safely (nothing in it is executed) into version-neutral records."""
    with pickles.gc_paused():
        return profile_from(*pickles.load(path), str(path), tinygrad_version)


def profile_from(obj: Any, classes: set[str], path: str, tinygrad_version: str | None = None) -> Profile:
    """The profile records of an already (safely) unpickled object."""
    if not isinstance(obj, list) or is_rewrites(obj):
        kind = "a rewrites trace" if is_rewrites(obj) else f"a {type(obj).__name__}"
        raise InputError(f"{path}: not a tinygrad profile ({kind}; a profile.pkl holds a list of events)")
    try:
        return _read(path, obj, classes, tinygrad_version)
    except InputError as e:
        raise InputError(f"{path}: {e}") from None
    except (AttributeError, TypeError, ValueError, KeyError, IndexError, ArithmeticError) as e:
        raise InputError(f"{path}: unexpected event layout ({type(e).__name__}: {e}); unknown tinygrad release?"
                         ) from None


def is_rewrites(obj: Any) -> bool:
    """Does an unpickled object look like a rewrites trace (any release) rather than a profile?"""
    if isinstance(obj, list):  # 0.10.0 rewrites: a list of (key, contexts) pairs
        return bool(obj) and all(isinstance(x, tuple) and len(x) == 2 for x in obj[:3])
    return class_name(obj) == "RewriteTrace" or (isinstance(obj, tuple) and len(obj) in (2, 3))


def _read(path: str, events: list, classes: set[str], override: str | None) -> Profile:
    first: dict[type, Any] = {}
    for e in events:  # the first instance of each class: field names for release detection
        if type(e) not in first:
            first[type(e)] = e
    fields = {class_name(e): tuple(e.__dict__) for t, e in first.items() if class_name(e)}
    graph = next((e for e in first.values() if class_name(e) == "ProfileGraphEvent" and e.__dict__.get("ents")), None)
    if graph is not None:
        fields["ProfileGraphEntry"] = tuple(graph.ents[0].__dict__)
    if events and not fields:
        raise InputError("not a tinygrad profile (its list holds no tinygrad events)")
    release = profile_release(classes, fields, _const_leaves(events)) if events else EMPTY
    prof = Profile(path, with_override(release, override), len(events))
    _Reader(prof, events).read(list(first))
    return prof


def _const_leaves(events: list, limit: int = 20000) -> list[tuple[int, bool]]:
    """CONST observations from UOps inside TracingKey.keys of host spans (for the 0.14.0/master decision)."""
    out: list[tuple[int, bool]] = []
    seen: set[int] = set()
    stack = [k for e in events[:limit] if class_name(e) == "ProfileRangeEvent" and class_name(e.__dict__.get("name"))
             == "TracingKey" for k in (e.name.__dict__.get("keys") or ()) if class_name(k) == "UOp"]
    while stack and len(out) < 2000:
        u = stack.pop()
        if id(u) in seen or len(u._args) < 4:
            continue
        seen.add(id(u))
        op, dtype, src, arg = u._args[:4]
        if (leaf := uop_leaf(op, dtype, src, arg)) is not None:
            out.append(leaf)
        stack.extend(s for s in src if class_name(s) == "UOp")
    return out


class _Reader:
    """One pass over the events. Written for speed: a profile can hold tens of millions of events."""

    def __init__(self, prof: Profile, events: list) -> None:
        self.prof, self.events = prof, events
        self.bitsize = prof.release.name not in ("0.10.1", "0.10.2", "0.10.3", "0.11.0")
        self.offsets: dict[str, tuple[int, int]] = {}  # device → (compute, copy) clock offset in ns
        self.keys: dict[Any, Key] = {}  # name str or id(TracingKey) → Key, so repeated names share one Key

    def read(self, types: list[type]) -> None:
        handlers = {"ProfileRangeEvent": self.range, "ProfilePointEvent": self.point, "ProfileGraphEvent": self.graph,
                    "ProfileProgramEvent": self.program, "ProfileDeviceEvent": self.device,
                    "ProfileSQTTEvent": self.sqtt, "ProfilePMCEvent": self.pmc, "ProfilePMAEvent": self.pma}
        by_type = {t: handlers.get(t.__dict__.get("_qualname", "").rsplit(".", 1)[-1], self.unknown) for t in types}
        for e in self.events:  # device events first: every timestamp needs its device's offset
            if by_type[type(e)] == self.device:
                self.device(e)
        for e in self.events:
            h = by_type[type(e)]
            if h != self.device:
                h(e)

    def key(self, name: Any) -> Key:
        k = self.keys.get(name if type(name) is str else id(name))
        if k is None:
            k = self.keys[name if type(name) is str else id(name)] = as_key(name)
        return k

    def offset(self, device: str, is_copy: Any) -> int:
        o = self.offsets.get(device)
        return 0 if o is None else o[1] if is_copy else o[0]

    def range(self, e: Any) -> None:
        # the hot path (most events are host ranges): lookups inlined
        d = e.__dict__
        dev, name, en = d["device"], d["name"], d.get("en")
        is_copy = d.get("is_copy", False)
        o = self.offsets.get(dev)
        off = 0 if o is None else o[1] if is_copy else o[0]
        k = self.keys.get(name) if type(name) is str else None
        self.prof.spans.append(Span(dev, k or self.key(name), ns(d["st"]) + off, None if en is None else ns(en) + off,
                                    d.get("profile_key"), -1, bool(is_copy)))

    def point(self, e: Any) -> None:
        d = e.__dict__
        kind, arg = d.get("name", ""), d.get("arg")
        if kind == "alloc" and isinstance(arg, dict):
            count, dt, nbytes = int(arg.get("sz") or 0), arg.get("dtype"), arg.get("nbytes")
            if nbytes is None:
                nbytes = min(count, 10**12) * dtype_bits(dt, self.bitsize) // 8
            arg = Alloc(int(nbytes), dtype_name(dt), count)
        elif kind == "exec" and isinstance(arg, dict):
            name, color = strip_ansi(str(arg.get("name", "")))
            arg = Exec(name, color, dict(arg.get("var_vals") or {}), list(arg.get("bufs") or ()),
                       tuple(arg.get("inputs") or ()), tuple(arg.get("outputs") or ()),
                       tuple(arg.get("metadata") or ()))
        elif kind == "marker" and isinstance(arg, dict):
            arg = Marker(strip_ansi(str(arg.get("name", "")))[0], arg.get("color"))
        self.prof.points.append(Point(d.get("device", ""), kind, ns(d["ts"]), d.get("key"), arg))

    def graph(self, e: Any) -> None:
        d, spans = e.__dict__, self.prof.spans
        sigs = [ns(s) for s in d.get("sigs") or ()]
        first = len(spans)
        for ent in d.get("ents") or ():
            x = ent.__dict__
            dev, is_copy = x["device"], x.get("is_copy", False)
            off = self.offset(dev, is_copy)
            spans.append(Span(dev, self.key(x.get("name", "")), sigs[x["st_id"]] + off, sigs[x["en_id"]] + off,
                              x.get("profile_key"), len(self.prof.graphs), bool(is_copy)))
        device = spans[first].device if len(spans) > first else ""
        self.prof.graphs.append(GraphBatch(device, list(range(first, len(spans))), list(d.get("deps") or ()), sigs))

    def program(self, e: Any) -> None:
        d = e.__dict__
        self.prof.programs.append(Program(d.get("device", ""), strip_ansi(str(d.get("name", "")))[0], d.get("lib"),
                                          d.get("base"), d.get("tag"), d.get("profile_key")))

    def device(self, e: Any) -> None:
        d = e.__dict__
        if "tdiff" in d or "comp_tdiff" not in d:  # >= 0.13: one offset; <= 0.12: compute and copy offsets
            comp = copy = ns(d.get("tdiff") or 0)
        else:
            comp, copy = ns(d.get("comp_tdiff") or 0), ns(d.get("copy_tdiff") or 0)
        self.offsets[d["device"]] = (comp, copy)
        self.prof.devices.append(DeviceInfo(d["device"], comp, copy, d.get("props")))

    def sqtt(self, e: Any) -> None:
        d = e.__dict__
        self.prof.captures.append(Capture("sqtt", d.get("device", ""), d.get("kern"), d.get("blob") or b"",
                                          d.get("exec_tag"), d.get("se"), d.get("itrace")))

    def pmc(self, e: Any) -> None:
        d = e.__dict__
        sched = [PMCSample(**{f: s.__dict__.get(f) for f in PMCSample.__slots__}) for s in d.get("sched") or ()]
        self.prof.captures.append(Capture("pmc", d.get("device", ""), d.get("kern"), d.get("blob") or b"",
                                          d.get("exec_tag"), sched=sched))

    def pma(self, e: Any) -> None:
        d = e.__dict__
        self.prof.captures.append(Capture("pma", d.get("device", ""), d.get("kern"), d.get("blob") or b"",
                                          d.get("exec_tag"), profile_key=d.get("profile_key")))

    def unknown(self, e: Any) -> None:
        name = class_name(e) or type(e).__name__
        self.prof.unknown[name] = self.prof.unknown.get(name, 0) + 1
