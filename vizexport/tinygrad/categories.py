"""What kind of work a launch is, from tinygrad's kernel naming (and its program's UOps where the rewrites trace gives
them): tinygrad names a kernel `r_…` when it reduces and `E_…` otherwise (codegen/opt/postrange.py) — just `r` or `E`
without dimensions, and with `n<k>` appended where names repeat (0.12: `En8`, `r_8_4n1`) — and a copy
`<src> -> <dst>` (or `copy …` on host-side devices). The timeline's reader fills the launch table's category column
with it (launchtable.CATEGORIES)."""
from __future__ import annotations

import re
from collections.abc import Sequence

from ..launchtable import COPY, ELEMENTWISE, GRAPH, OTHER, REDUCE, TENSOR_CORES
from ..timeline import Role

_KIND = re.compile(r"([rE])(?:_|n\d+$|$)")  # the kind letter of a kernel name: r_4_32, E, En8


def category(name: str, role: Role | None = None, uops: Sequence[str] | None = None) -> str:
    """The category of a slice of a device track named `name`; `uops`: its program's UOp list (records.Context
    .program lines), when known."""
    if role == Role.GRAPH:
        return GRAPH
    if role == Role.COPY or " -> " in name or name.startswith(("copy ", "COPY ")):
        return COPY
    if uops is not None and any(line.split()[1:2] == ["Ops.WMMA"] for line in uops):
        return TENSOR_CORES
    kind = _KIND.match(name)
    return OTHER if kind is None else REDUCE if kind.group(1) == "r" else ELEMENTWISE
