"""Compile-time kernel estimates (FLOPs, bytes) from a rewrites trace, linked to launches and evaluated with a
launch's variable values, as each release's own viewer does.

Where the estimates are: 0.13+ keep them on the KernelInfo of the kernel's PROGRAM (the "View Program" step);
0.11/0.12 pickled none, their viewer counted them from the ProgramSpec (flops.py). How a launch finds them: by
`profile_key` (0.14+) or by the launch's name (older), through every key of every context, a later context winning
(the viewers' ref_map). Which variables: the launch's exec event (the latest on its device; for a JIT graph entry,
the batch's); 0.12 takes the latest exec of the same kernel name and shows nothing without one; 0.11 has no exec
events and shows figures only when they need no variables.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..launchtable import rate
from ..records import Context, RewriteLog, UOpRec
from ..timeline import ARG_GBS_LDS, ARG_GBS_MEM, ARG_GFLOPS
from .flops import program_estimates
from .releases import enum_table, traits
from .symbolic import sym_eval

Figures = tuple[float | int | None, float | int | None, float | int | None]  # (ops, lds, mem)
LaunchFigures = tuple[float | None, float | None, float | None]  # (FLOPs, mem, lds): the launch table's order


@dataclass
class UOpCost:
    """0.13+: the KernelInfo.estimates stand-in of a kernel's PROGRAM (fields may be UOp expressions)."""

    estimates: Any
    ops: dict[int, str]

    def figures(self, var_vals: dict[str, int]) -> Figures:
        d = getattr(self.estimates, "__dict__", {})
        return tuple(sym_eval(d.get(f), var_vals, self.ops) for f in ("ops", "lds", "mem"))  # type: ignore[return-value]


@dataclass
class SpecCost:
    """0.11/0.12: counted from the ProgramSpec (the context's TracingKey.ret) when first needed."""

    spec: Any
    release: str
    _counted: Any = None

    def figures(self, var_vals: dict[str, int]) -> Figures:
        if self._counted is None:
            self._counted = program_estimates(self.spec, self.release) or False
        values = self._counted.values(var_vals) if self._counted else None
        return values if values is not None else (None, None, None)


def context_cost(ret: Any, rewrites: list, uops: dict[int, UOpRec], release: str) -> UOpCost | SpecCost | None:
    """The estimates of a codegen context: from its ProgramSpec (`ret`, 0.11/0.12) or its View Program step."""
    if traits(release).spec_counting is not None:
        return SpecCost(ret, release) if ret is not None else None
    for r in rewrites:
        prog = uops.get(r.sink)
        if r.name == "View Program" and prog is not None and prog.src and prog.src[0] in uops:
            est = getattr(uops[prog.src[0]].arg, "__dict__", {}).get("estimates")
            return UOpCost(est, enum_table(release)) if est is not None else None
    return None


class LaunchEstimates:
    """Launch → its codegen context (display name, estimates) and the figures of one launch."""

    def __init__(self, log: RewriteLog) -> None:
        self.by_key: dict[Any, Context] = {k: c for c in log.contexts for k in c.key.keys}  # a later context wins
        self.by_name = not traits(log.release.name).link_by_program_key
        self.exec_by_name = traits(log.release.name).exec_by_name  # the exec giving variables must name the kernel

    def lookup(self, profile_key: bytes | None, name: str) -> Context | None:
        """The codegen context of a launch: by its program key, or (before 0.14) by its name."""
        return self.by_key.get(profile_key if profile_key is not None or not self.by_name else name)

    @staticmethod
    def figures(ctx: Context, var_vals: dict) -> LaunchFigures:
        """(FLOPs, bytes loaded and stored, bytes of local memory) of one launch: None for a figure that does not
        evaluate (or that no number could be shown for)."""
        if ctx.cost is None:
            return None, None, None
        ops, lds, mem = map(_figure, ctx.cost.figures(var_vals))
        return ops, mem, lds


def rate_args(figures: LaunchFigures, dur: int) -> dict[str, float]:
    """GFLOPS and GB/s of one launch lasting `dur` ns (> 0), as its slice shows them (the figures that evaluate)."""
    return {label: rate(v, dur) for label, v in zip((ARG_GFLOPS, ARG_GBS_MEM, ARG_GBS_LDS), figures, strict=True)
            if v is not None}


MAX_FIGURE = 1e30  # FLOPs or bytes of one launch: real kernels are far below, a crafted trace's may be anything


def _figure(v: Any) -> float | None:
    """A count as a float, or None (not shown) for one that is no number, NaN, infinite or past MAX_FIGURE: a rate
    of it would be infinite in the trace and in JSON, or overflow float."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if -MAX_FIGURE < v < MAX_FIGURE else None
