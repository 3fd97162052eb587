"""`vizexport info`: what is in a profile or rewrites pickle, as a JSON-able summary and as text."""
from __future__ import annotations

from collections import defaultdict
from typing import Any

from .records import Alloc, Profile, RewriteLog
from .sqtt import launch_counters, load_launches, pmc_text


def memory_peaks(p: Profile) -> dict[str, int]:
    """Per device, the maximum of live buffer bytes (alloc adds, free of the same key subtracts; list order)."""
    live: dict[str, dict[Any, int]] = defaultdict(dict)
    total: dict[str, int] = defaultdict(int)
    peak: dict[str, int] = {}
    for pt in p.points:
        if pt.kind == "alloc" and isinstance(pt.arg, Alloc):
            live[pt.device][pt.key] = pt.arg.nbytes
            total[pt.device] += pt.arg.nbytes
            peak[pt.device] = max(peak.get(pt.device, 0), total[pt.device])
        elif pt.kind == "free":
            total[pt.device] -= live[pt.device].pop(pt.key, 0)
    return peak


def event_counts(p: Profile) -> dict[str, dict[str, int]]:
    """device → kind → number of pickled events (graph entries counted on their own devices)."""
    out: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for s in p.spans:
        out[s.device]["graph_entry" if s.graph >= 0 else "range"] += 1
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
    ts = [t for s in p.spans for t in (s.st, s.en) if t is not None] + [pt.ts for pt in p.points]
    return [min(ts), max(ts)] if ts else None


def release_info(r: Any) -> dict:
    return {"release": r.name, "confidence": r.confidence, "reason": r.reason, "candidates": list(r.candidates)}


def summarize(x: Profile | RewriteLog) -> dict:
    if isinstance(x, Profile):
        out = {"file": x.path, "kind": "profile", "tinygrad": release_info(x.release), "n_events": x.n_events,
               "events": event_counts(x), "span_ns": time_span(x),
               "memory_peak": dict(sorted(memory_peaks(x).items())), "unknown_classes": x.unknown}
        if x.captures:
            launches = load_launches(x, disasm=False)
            out["pmc"] = launch_counters(x, launches)
            out["sqtt"] = sqtt_summary(launches)
        return out
    rws = [r for c in x.contexts for r in c.rewrites]
    return {"file": x.path, "kind": "rewrites", "tinygrad": release_info(x.release), "contexts": len(x.contexts),
            "rewrites": len(rws), "matches": sum(m.after is not None for r in rws for m in r.matches),
            "match_records": sum(len(r.matches) for r in rws), "uops": len(x.uops)}


def sqtt_summary(launches: list) -> list[dict]:
    """Per launch with SQTT blobs: how many shader engines, waves, traced waves and instruction issues."""
    rows = []
    for la in launches:
        waves = [w for b in la.blobs for w in b.waves]
        if la.blobs:
            rows.append({"device": la.device, "kernel": la.name, "run": la.run, "blobs": len(la.blobs),
                         "waves": len(waves), "traced_waves": sum(w.traced for w in waves),
                         "issues": sum(len(w.issues) for w in waves)})
    return rows


def _bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def as_text(s: dict) -> str:
    tg = s["tinygrad"]
    lines = [f"{s['file']}: tinygrad {s['kind']}, release {tg['release']} ({tg['confidence']}: {tg['reason']})"]
    if s["kind"] == "rewrites":
        lines.append(f"  {s['contexts']} contexts, {s['rewrites']} rewrites, {s['matches']} matches, {s['uops']} UOps")
        return "\n".join(lines)
    span = s["span_ns"]
    dur = f"{(span[1] - span[0]) / 1e6:.3f} ms" if span else "no timestamps"
    lines.append(f"  {s['n_events']} events, time span {dur}")
    for dev, kinds in s["events"].items():
        peak = s["memory_peak"].get(dev)
        extra = f"   (memory peak {_bytes(peak)})" if peak is not None else ""
        lines.append(f"  {dev:20s} " + ", ".join(f"{k} {n}" for k, n in kinds.items()) + extra)
    for r in s.get("sqtt", []):
        lines.append(f"SQTT {r['kernel']} n{r['run']} ({r['device']}): {r['blobs']} blobs, {r['waves']} waves, "
                     f"{r['traced_waves']} traced, {r['issues']} instruction issues")
    if s.get("pmc"):
        lines.append(pmc_text(s["pmc"]))
    if s["unknown_classes"]:
        lines.append("  not read: " + ", ".join(f"{k} ×{n}" for k, n in s["unknown_classes"].items()))
    return "\n".join(lines)
