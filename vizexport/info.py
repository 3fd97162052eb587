"""`vizexport info`: a Summary as text (one block per file) or as JSON."""
from __future__ import annotations

import json
from typing import Any

from .records import to_json
from .summary import ProfileSummary, Summary
from .units import bytes_text


def as_json(summaries: list[Summary]) -> str:
    return json.dumps([to_json(s) for s in summaries], indent=1)


def as_text(s: Summary) -> str:
    tg = s.tinygrad
    lines = [f"{s.file}: tinygrad {s.kind}, release {tg.release} ({tg.confidence}: {tg.reason})"]
    if not isinstance(s, ProfileSummary):
        lines.append(f"  {s.contexts} contexts, {s.rewrites} rewrites, {s.matches} matches, {s.uops} UOps")
        return "\n".join(lines)
    span = s.span_ns
    dur = f"{(span[1] - span[0]) / 1e6:.3f} ms" if span else "no timestamps"
    lines.append(f"  {s.n_events} events, time span {dur}")
    for dev, kinds in s.events.items():
        peak = s.memory_peak.get(dev)
        extra = f"   (memory peak {bytes_text(peak)})" if peak is not None else ""
        lines.append(f"  {dev:20s} " + ", ".join(f"{k} {n}" for k, n in kinds.items()) + extra)
    for r in s.sqtt or ():
        lines.append(f"SQTT {r.kernel} n{r.run} ({r.device}): {r.blobs} blobs, {r.waves} waves, "
                     f"{r.traced_waves} traced, {r.issues} instruction issues")
    if s.pmc:
        lines.append(pmc_text(s.pmc))
    if s.unknown_classes:
        lines.append("  not read: " + ", ".join(f"{k} ×{n}" for k, n in s.unknown_classes.items()))
    return "\n".join(lines)


def pmc_text(rows: list[dict[str, Any]]) -> str:
    """The per-launch counter table of `vizexport info`: one block per launch, one line per counter."""
    lines = []
    for r in rows:
        lines.append(f"PMC {r['kernel']} n{r['run']} ({r['device']}, kern {r['kern']}, exec {r['exec_tag']})")
        width = max((len(n) for n in r["counters"]), default=0)
        for name, c in r["counters"].items():
            lines.append(f"  {name:<{width}}  sum {c['sum']:>14,}  max {c['max']:>12,}  n {c['count']}")
        for name, v in r["derived"].items():
            lines.append(f"  {name}: {v:.1f}%")
        if r.get("error"):
            lines.append(f"  ! {r['error']}")
    return "\n".join(lines)
