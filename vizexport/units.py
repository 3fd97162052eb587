"""How sizes and durations are written for people (the same everywhere: info, site, reports)."""
from __future__ import annotations

_BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")
_TIME_UNITS = (("s", 1e9), ("ms", 1e6), ("µs", 1e3))


def bytes_text(n: float) -> str:
    """'512 B', '1.5 KiB', … '2.0 TiB'."""
    for unit in _BYTE_UNITS:
        if abs(n) < 1024 or unit == _BYTE_UNITS[-1]:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def duration_text(ns: float) -> str:
    """'1.234 s', '5.000 ms', '12.500 µs', '800 ns'."""
    for unit, scale in _TIME_UNITS:
        if abs(ns) >= scale:
            return f"{ns / scale:.3f} {unit}"
    return f"{ns:.0f} ns"
