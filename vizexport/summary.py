"""What a profile or a rewrites trace holds, in figures: built once per input by the command, shown by `info` (text
or JSON) and by the site. Decided by content, not by file name."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .records import OPTIONAL, Marker, Profile, Release, RewriteLog


@dataclass
class ReleaseInfo:
    release: str
    confidence: str
    reason: str
    candidates: list[str]

    @classmethod
    def of(cls, r: Release) -> ReleaseInfo:
        return cls(r.name, r.confidence, r.reason, list(r.candidates))


@dataclass
class SQTTLaunch:
    """A kernel launch with SQTT blobs: how many shader engines, waves, traced waves and instruction issues."""

    device: str
    kernel: str
    run: int
    blobs: int
    waves: int
    traced_waves: int
    issues: int


@dataclass
class MarkerCount:
    """The markers of one name (tinygrad's Tensor markers; `top --between` takes two names): how many, and the time
    of the first from the profile's first timestamp (span_ns[0])."""

    name: str
    count: int
    first_ns: int


@dataclass
class ProfileSummary:
    file: str
    kind: str = field(default="profile", init=False)
    tinygrad: ReleaseInfo
    n_events: int
    events: dict[str, dict[str, int]]  # device → kind → pickled events (graph entries on their own devices)
    span_ns: list[int] | None  # first and last timestamp
    memory_peak: dict[str, int]  # device → most live buffer bytes at any time
    unknown_classes: dict[str, int]  # classes not read, with counts
    pmc: list[dict[str, Any]] | None = field(default=None, metadata=OPTIONAL)  # sqtt.launch_counters rows
    sqtt: list[SQTTLaunch] | None = field(default=None, metadata=OPTIONAL)
    markers: list[MarkerCount] | None = field(default=None, metadata=OPTIONAL)  # by first time; None: no marker


@dataclass
class RewritesSummary:
    file: str
    kind: str = field(default="rewrites", init=False)
    tinygrad: ReleaseInfo
    contexts: int
    rewrites: int
    matches: int  # matches that replaced something
    match_records: int  # every record (0.10.0 also records visits without a match)
    uops: int


Summary = ProfileSummary | RewritesSummary


def summarize(x: Profile | RewriteLog, pmc: list[dict[str, Any]] | None = None, sqtt: list[SQTTLaunch] | None = None
              ) -> Summary:
    """The figures of a profile or of a rewrites trace. A profile's SQTT/PMC rows come from its reader, decoded
    (api.summarize): the model decodes nothing."""
    if isinstance(x, RewriteLog):
        rws = [r for c in x.contexts for r in c.rewrites]
        return RewritesSummary(x.path, ReleaseInfo.of(x.release), len(x.contexts), len(rws),
                               sum(m.after is not None for r in rws for m in r.matches),
                               sum(len(r.matches) for r in rws), len(x.uops))
    span = time_span(x)
    return ProfileSummary(x.path, ReleaseInfo.of(x.release), x.n_events, event_counts(x), span,
                          memory_peaks(x), x.unknown, pmc, sqtt, marker_counts(x, span[0] if span else 0))


def marker_counts(p: Profile, t0: int) -> list[MarkerCount] | None:
    """Each marker name's count and first time (from t0), in the order they first came; None without markers."""
    out: dict[str, MarkerCount] = {}
    for pt in sorted((pt for pt in p.points if pt.kind == "marker"), key=lambda pt: pt.ts):
        name = pt.arg.name if isinstance(pt.arg, Marker) else str(pt.arg)
        if name in out:
            out[name].count += 1
        else:
            out[name] = MarkerCount(name, 1, pt.ts - t0)
    return list(out.values()) or None


def memory_peaks(p: Profile) -> dict[str, int]:
    """Per device that allocated anything, the maximum of its live buffer bytes over time."""
    has_alloc = {pt.device for pt in p.points if pt.kind == "alloc"}
    return {dev: max(totals) for dev, (_, totals) in sorted(p.memory().items()) if dev in has_alloc}


def event_counts(p: Profile) -> dict[str, dict[str, int]]:
    """device → kind → number of pickled events (graph entries counted on their own devices)."""
    out: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    spans = p.spans
    for kind, rows in (("range", spans.graph < 0), ("graph_entry", spans.graph >= 0)):
        for code, n in enumerate(np.bincount(spans.device[rows], minlength=len(spans.devices)).tolist()):
            if n:
                out[spans.devices[code]][kind] += n
    for pt in p.points:
        out[pt.device][pt.kind] += 1
    for g in p.graphs:
        out[g.device]["graph"] += 1
    for pr in p.programs:
        out[pr.device]["program"] += 1
    for d in p.devices:
        out[d.device]["device"] += 1
    for c in p.captures:
        out[c.device][c.kind] += 1
    return {d: dict(sorted(k.items())) for d, k in sorted(out.items())}


def time_span(p: Profile) -> list[int] | None:
    ts = [pt.ts for pt in p.points]
    if len(p.spans):  # a never-ended span's end is its start
        ts += [int(p.spans.st.min()), int(p.spans.en.max())]
    return [min(ts), max(ts)] if ts else None
