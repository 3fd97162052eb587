"""Which tinygrad release wrote a pickle (pickles carry no version stamp), and that release's enum tables.

The schema gives the release family (tinygrad-formats.md §3.4); where two releases share a schema but not their
`Ops` numbering (0.14.0 vs master), the UOps themselves decide: leaves with a numeric argument and a value dtype
can only be CONST, so the right table names them CONST.
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from ..pickles import InputError, class_name
from ..records import Release
from .standins import get_field, has

RELEASES = ("0.10.0", "0.10.1", "0.10.2", "0.10.3", "0.11.0", "0.12.0", "0.13.0", "0.14.0", "master")
NEWEST = "master"


@dataclass(frozen=True)
class Replay:
    """How one release's viewer replays matches (serve.py get_details/get_full_rewrite + UOp.substitute)."""

    walk_flag: bool  # honour TrackedGraphRewrite.walk (0.14+); else always the fixed-point substitute
    always_walk: bool  # 0.10.0's viewer: one lookup per node, no descent into replacements
    call_bodies: str  # "enter": substitute everywhere; "skip": CALL/FUNCTION bodies untouched; "opaque": 0.14 rule
    rebuild_dtype: bool  # 0.14+: a rebuilt node re-derives its dtype when a source's dtype changed
    advance: str = "flag"  # "flag": top-down rewrites advance the sink, bottom-up ones do not; "always"; "never"
    tags: bool = True  # UOps have a tag (0.11+; a 0.10.x UOp's fifth field is metadata or a buffer, not a tag)


@dataclass(frozen=True)
class SpecCounting:
    """How `ProgramSpec.estimates` counts where a release pickled no estimates (0.11/0.12: flops.py)."""

    ints_only: bool  # the viewer shows figures only when all three are ints (0.11: no var_vals to evaluate with)
    loop_end: str  # the op that closes a RANGE in a linearized program
    special_size_in_arg: bool  # a SPECIAL's launch size is arg[1] (0.11), else its first source
    whole_index: bool  # what is indexing (not counted): 0.11: the whole index graph of each access not on
    # registers; 0.12: of every access, an INDEX's offsets up to the RANGEs
    mem_from_ast: bool  # 0.11: mem from the AST's consecutive buffer accesses; 0.12: each global buffer accessed


@dataclass(frozen=True)
class Traits:
    """What reader code needs to know of the release that wrote a pickle. Readers ask these, never a release name."""

    dtype_bits: bool  # a pickled DType's size field is in bits (0.12+), else in bytes (itemsize)
    vec_above_one: bool  # a dtype prints `.vec(n)` for count > 1 (later releases: for count != 1)
    ptr_spelling: str  # PtrDType repr: "local0" (0.10.0: local=True only), "local" (size, local=True), "addrspace"
    spec_counting: SpecCounting | None  # estimates counted from the ProgramSpec (None: pickled on the PROGRAM)
    link_by_program_key: bool  # launches find their kernel by profile_key only (older: by name as well)
    exec_by_name: bool  # the exec event that gives a launch its variables must name the kernel (0.12)
    replay: Replay
    cpu_timed_on_hcq2: bool = False  # its CPU device times kernels only on the HCQ2=1 path (0.14+)


_OLD_REPLAY = Replay(False, False, "enter", False, tags=False)  # 0.10.2/0.10.3
_COUNT_011 = SpecCounting(ints_only=True, loop_end="ENDRANGE", special_size_in_arg=True, whole_index=True,
                          mem_from_ast=True)
_COUNT_012 = SpecCounting(ints_only=False, loop_end="END", special_size_in_arg=False, whole_index=False,
                          mem_from_ast=False)
_MASTER = Traits(True, False, "addrspace", None, True, False, Replay(True, False, "opaque", True),
                 cpu_timed_on_hcq2=True)
TRAITS: dict[str, Traits] = {
    "0.10.0": Traits(False, True, "local0", None, False, False, Replay(False, True, "enter", False, "always", False)),
    "0.10.1": Traits(False, True, "local", None, False, False,  # its viewer substitutes every step into the input
                     Replay(False, False, "enter", False, "never", False)),
    "0.10.2": Traits(False, True, "local", None, False, False, _OLD_REPLAY),
    "0.10.3": Traits(False, True, "local", None, False, False, _OLD_REPLAY),
    "0.11.0": Traits(False, True, "addrspace", _COUNT_011, False, False, Replay(False, False, "enter", False)),
    "0.12.0": Traits(True, False, "addrspace", _COUNT_012, False, True, Replay(False, False, "enter", False)),
    "0.13.0": Traits(True, False, "addrspace", None, False, False, Replay(False, False, "skip", False)),
    "0.14.0": _MASTER,
    NEWEST: _MASTER,
}


def traits(release: str) -> Traits:
    """The traits of `release` (of master for one not in the table: `known`)."""
    return TRAITS[known(release)]


def known(release: str) -> str:
    """The one place with a default: a release not in RELEASES (a newer build, or "unknown" for an empty profile) is
    read as the newest known, master (its traits and its enum tables)."""
    return release if release in RELEASES else NEWEST


@cache
def enum_table(release: str, enum: str = "Ops") -> dict[int, str]:
    """value → name of `enum` in `release` (empty if that release has no such enum)."""
    text = resources.files("vizexport.data.enums").joinpath(f"{known(release)}.json").read_text()
    values = json.loads(text)["enums"].get(enum, {}).get("values", {})
    return {int(k): v for k, v in values.items()}


@cache
def dtype_names(release: str) -> dict[str, str]:
    """DType.name → the attribute its repr prints (`dtypes.uint` for 'unsigned int') in `release`."""
    text = resources.files("vizexport.data.enums").joinpath(f"{known(release)}.json").read_text()
    return dict(json.loads(text).get("dtypes", {}))


def check_override(release: str) -> str:
    if release not in RELEASES:
        raise InputError(f"unknown tinygrad version {release!r} (known: {', '.join(RELEASES)})")
    return release


def const_score(release: str, leaves: Iterable[tuple[int, bool]]) -> int:
    """How many of the given (op, must_be_const) leaves the release's Ops table names consistently."""
    ops = enum_table(release)
    return sum((ops.get(op) == "CONST") == must for op, must in leaves)


def pick_by_content(candidates: tuple[str, ...], leaves: list[tuple[int, bool]], why: str) -> Release:
    """Choose among schema-identical releases by which Ops table makes the UOps consistent."""
    if not leaves:
        return Release(candidates[0], "ambiguous", f"{why}; no UOps to tell {' from '.join(candidates)} apart, "
                       f"assuming {candidates[0]} (use --tinygrad-version to override)", candidates)
    scores = {r: const_score(r, leaves) for r in candidates}
    best = max(scores.values())
    winners = [r for r in candidates if scores[r] == best]
    detail = ", ".join(f"{r}: {scores[r]}/{len(leaves)}" for r in candidates)
    if len(winners) > 1:
        return Release(winners[0], "ambiguous", f"{why}; UOp constants fit {' and '.join(winners)} equally "
                       f"({detail}), assuming {winners[0]}", candidates)
    runner_up = max((v for r, v in scores.items() if r != winners[0]), default=0)
    sure = "certain" if best == len(leaves) and runner_up * 2 <= len(leaves) else "likely"
    return Release(winners[0], sure, f"{why}; Ops numbering decided by {len(leaves)} constant nodes ({detail})",
                   candidates)


def uop_leaf(op: Any, dtype: Any, src: Any, arg: Any) -> tuple[int, bool] | None:
    """A (op, must_be_const) observation from one UOp, or None if it says nothing.

    A leaf with a plain number argument and a scalar value dtype is a CONST; a leaf with a str argument never is.
    """
    if src or not isinstance(op, int):
        return None
    if class_name(dtype) != "DType" or not has(dtype, "name") or get_field(dtype, "name") == "void":
        return None
    if type(arg) in (int, float) or class_name(arg) == "ConstFloat":
        return (int(op), True)
    if isinstance(arg, str):
        return (int(op), False)
    return None


def profile_release(classes: set[str], fields: dict[str, tuple[str, ...]], leaves: list[tuple[int, bool]]
                    ) -> Release:
    """Release of a profile pickle from the classes it named and the fields of the first event of each class."""
    rng = fields.get("ProfileRangeEvent", ())
    dev = fields.get("ProfileDeviceEvent", ())
    pnt = fields.get("ProfilePointEvent", ())
    if "tinygrad.device.ProfileRangeEvent" in classes:
        if any(c.endswith(("ProfileProgramEvent", "ProfileSQTTEvent")) for c in classes):
            return Release("0.10.3", "likely", "ProfileRangeEvent in tinygrad.device with program/SQTT events")
        cands = ("0.10.2", "0.10.1", "0.10.3")
        return Release("0.10.2", "ambiguous", "ProfileRangeEvent in tinygrad.device (0.10.1-0.10.3 share it)", cands)
    if "is_copy" in rng or "comp_tdiff" in dev:
        old = "props" not in dev if dev else None
        if pnt:
            old = pnt.index("ts") < pnt.index("key") if "ts" in pnt and "key" in pnt else old
        if "tinygrad.helpers.TracingKey" in classes and old is None:
            old = False
        if old is None:
            return Release("0.12.0", "ambiguous", "is_copy/comp_tdiff fields (0.11.0 or 0.12.0)", ("0.12.0", "0.11.0"))
        return Release("0.11.0" if old else "0.12.0", "certain",
                       "is_copy/comp_tdiff fields; " + ("no device props, point ts before key" if old else
                                                        "device props / point field order of 0.12"))
    if "profile_key" in rng or any(c.endswith("ParamArg") for c in classes) or \
            "profile_key" in fields.get("ProfileProgramEvent", ()) or "profile_key" in fields.get("ProfileGraphEntry",
                                                                                                     ()):
        return pick_by_content(("0.14.0", "master"), leaves, "profile_key fields (0.14.0/master schema)")
    if "tdiff" in dev or rng:
        return Release("0.13.0", "likely", "single tdiff, no is_copy, no profile_key (0.13.0 schema; a master "
                       "build between 0.13.0 and 0.14.0 looks the same)")
    raise InputError("no tinygrad profile events recognised (unknown tinygrad release?)")


def rewrites_release(top: Any, classes: set[str], rw_fields: tuple[str, ...], leaves: list[tuple[int, bool]]
                     ) -> Release:
    """Release of a rewrites pickle from its top-level layout and the fields of a TrackedGraphRewrite."""
    if isinstance(top, list):
        return Release("0.10.0", "certain", "top level is a list of (key, contexts)")
    if isinstance(top, tuple) and len(top) == 2:
        if "depth" in rw_fields:
            return Release("0.10.3", "certain", "2-tuple trace; rewrites have depth")
        if "bottom_up" in rw_fields:
            return Release("0.10.2", "certain", "2-tuple trace; rewrites have bottom_up, no depth")
        return Release("0.10.1", "certain", "2-tuple trace; rewrites have no bottom_up")
    if isinstance(top, tuple) and len(top) == 3:
        return Release("0.11.0", "certain", "3-tuple trace with uop_fields")
    if class_name(top) != "RewriteTrace":
        raise InputError("not a tinygrad rewrites trace (unknown top-level layout)")
    if "walk" in rw_fields or any(c.endswith("ParamArg") for c in classes):
        return pick_by_content(("0.14.0", "master"), leaves, "RewriteTrace with walk/enter_calls (0.14.0/master)")
    if "tinygrad.renderer.ProgramSpec" in classes:
        return Release("0.12.0", "certain", "RewriteTrace whose keys carry a ProgramSpec")
    return Release("0.13.0", "likely", "RewriteTrace without walk/enter_calls or ProgramSpec (0.13.0 schema)")


def with_override(found: Release, override: str | None) -> Release:
    if override is None:
        return found
    return Release(check_override(override), "override", f"--tinygrad-version {override} (detected {found.name}: "
                   f"{found.reason})", found.candidates)
