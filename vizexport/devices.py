"""How tinygrad names where work runs: host tracks, device roots, copy engines, and their natural order.

A leaf module (it imports nothing of vizexport at run time): readers, the SQTT decoder and the analyses share it.
"""
from __future__ import annotations

import re
from typing import Any, Protocol

HOST = ("TINY", "USER", "GC")  # host-side roots, in the order they are shown: compiler, Tensor API calls, GC
_NUM = re.compile(r"(\d+)")


def natural(s: str) -> tuple:
    """Sort key that orders numbers by value: NULL, NULL:1, NULL:2, …, NULL:10."""
    return tuple(int(p) if p.isdigit() else p for p in _NUM.split(s))


def device_root(dev: str) -> str:
    """'NULL:1:SDMA:0' → 'NULL:1', 'AMD:SDMA:0' → 'AMD', 'PYTHON:COPY' → 'PYTHON'."""
    parts = dev.split(":")
    return ":".join(parts[:2]) if len(parts) > 1 and parts[1].isdigit() else parts[0]


def is_copy_engine(dev: str) -> bool:
    """A copy engine's device string: 'AMD:SDMA:0', 'NULL:1:SDMA:0', 'CPU:COPY'."""
    return ":SDMA" in dev or dev.endswith(":COPY")


class SpanFields(Protocol):
    """What `is_copy` reads of a records.Span (named by its fields: records imports this module)."""

    is_copy: bool
    key: Any  # its .ret: what the range returned
    device: str


def is_copy(s: SpanFields) -> bool:
    """A copy rather than a kernel: flagged so, on a copy engine, or its result is the byte count it moved."""
    return s.is_copy or isinstance(s.key.ret, int) or is_copy_engine(s.device)
