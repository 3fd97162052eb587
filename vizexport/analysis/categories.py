"""What kind of work a kernel is, from tinygrad's kernel naming (and its program's UOps where the rewrites trace gives
them): tinygrad names a kernel `r_…` when it reduces and `E_…` otherwise (codegen/opt/postrange.py), and a copy
`<src> -> <dst>` (or `copy …` on host-side devices)."""
from __future__ import annotations

from collections.abc import Sequence

from ..timeline import Role

ELEMENTWISE = "elementwise"
REDUCE = "reduce"
TENSOR_CORES = "matmul (tensor cores)"
COPY = "copy"
GRAPH = "graph batch"
OTHER = "other"
CATEGORIES = (ELEMENTWISE, REDUCE, TENSOR_CORES, COPY, GRAPH, OTHER)


def category(name: str, role: Role | None = None, uops: Sequence[str] | None = None) -> str:
    """The category of a slice of a device track named `name`; `uops`: its program's UOp list (records.Context
    .program lines), when known."""
    if role == Role.GRAPH:
        return GRAPH
    if role == Role.COPY or " -> " in name or name.startswith(("copy ", "COPY ")):
        return COPY
    if uops is not None and any(line.split()[1:2] == ["Ops.WMMA"] for line in uops):
        return TENSOR_CORES
    if name == "r" or name.startswith("r_"):  # a kernel without ranges is named by its kind alone
        return REDUCE
    if name == "E" or name.startswith("E_"):
        return ELEMENTWISE
    return OTHER
