"""`vizexport info`: a Summary as text (one block per file) or as JSON."""
from __future__ import annotations

import json
from typing import Any

from .records import to_json
from .summary import MarkerCount, ProfileSummary, Summary
from .text import lines, shown
from .units import bytes_text, duration_text

MARKER_LINES = 20  # marker names listed as text (--json lists every one)


def as_json(summaries: list[Summary]) -> str:
    return json.dumps([to_json(s) for s in summaries], indent=1)


def as_text(s: Summary) -> str:
    """The summary as lines for a terminal: names from the pickle shown as one bounded line each (text.shown)."""
    return lines(_text(s))


def _text(s: Summary) -> str:
    tg = s.tinygrad
    out = [f"{s.file}: tinygrad {s.kind}, release {tg.release} ({tg.confidence}: {tg.reason})"]
    if not isinstance(s, ProfileSummary):
        out.append(f"  {s.contexts} contexts, {s.rewrites} rewrites, {s.matches} matches, {s.uops} UOps")
        return "\n".join(out)
    span = s.span_ns
    dur = f"{(span[1] - span[0]) / 1e6:.3f} ms" if span else "no timestamps"
    out.append(f"  {s.n_events} events, time span {dur}")
    for dev, kinds in s.events.items():
        peak = s.memory_peak.get(dev)
        extra = f"   (memory peak {bytes_text(peak)})" if peak is not None else ""
        out.append(f"  {shown(dev):20s} " + ", ".join(f"{k} {n}" for k, n in kinds.items()) + extra)
    if s.markers:
        out.extend(markers_text(s.markers))
    for r in s.sqtt or ():
        out.append(f"SQTT {shown(r.kernel)} n{r.run} ({shown(r.device)}): {r.blobs} blobs, {r.waves} waves, "
                   f"{r.traced_waves} traced, {r.issues} instruction issues")
    if s.pmc:
        out.append(pmc_text(s.pmc))
    if s.unknown_classes:
        out.append("  not read: " + ", ".join(f"{shown(k)} ×{n}" for k, n in s.unknown_classes.items()))
    return "\n".join(out)


def markers_text(markers: list[MarkerCount]) -> list[str]:
    """`  markers: 6 (3 names)`, then a line per name: its count and first time from the profile's first event."""
    out = [f"  markers: {sum(m.count for m in markers)} ({len(markers)} names)"]
    names = [shown(m.name) for m in markers[:MARKER_LINES]]
    width = max(map(len, names))
    out += [f"    {n:<{width}}  ×{m.count:<4} first at {duration_text(m.first_ns)}"
            for n, m in zip(names, markers[:MARKER_LINES], strict=True)]
    if len(markers) > MARKER_LINES:
        out.append(f"    … and {len(markers) - MARKER_LINES} more names (--json lists them)")
    return out


def pmc_text(rows: list[dict[str, Any]]) -> str:
    """The per-launch counter table of `vizexport info`: one block per launch, one line per counter."""
    out = []
    for r in rows:
        out.append(f"PMC {shown(r['kernel'])} n{r['run']} ({shown(r['device'])}, kern {r['kern']}, "
                   f"exec {r['exec_tag']})")
        names = {name: shown(name) for name in r["counters"]}
        width = max(map(len, names.values()), default=0)
        for name, c in r["counters"].items():
            out.append(f"  {names[name]:<{width}}  sum {c['sum']:>14,}  max {c['max']:>12,}  n {c['count']}")
        for name, v in r["derived"].items():
            out.append(f"  {shown(name)}: {v:.1f}%")
        if r.get("error"):
            out.append(f"  ! {shown(r['error'])}")
    return lines("\n".join(out))
