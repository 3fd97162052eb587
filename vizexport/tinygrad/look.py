"""How tinygrad's viewer shows a UOp node: the text of its box, its colour by op family, and which nodes fold into
their users' boxes (constants, and broadcasts of them, as "CONST<i> <value>" lines). Mixed into `replay.Nodes`, which
so provides the StepNodes view that the graph writers draw (records.StepNodes)."""
from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from .args import ArgText

ERROR_OP = "REWRITE_ERROR"
FOLDED = frozenset({"CONST"})
BROADCAST = frozenset({"RESHAPE", "EXPAND"})
ERROR_FILL = "#1a1b26"
_FAMILIES: dict[str, tuple[str, ...]] = {
    "#ffffc0": ("ADD", "SUB", "MUL", "FDIV", "IDIV", "CDIV", "FLOORDIV", "FLOORMOD", "MOD", "CMOD", "MAX", "MIN",
                "NEG", "EXP2", "LOG2", "SIN", "SQRT", "RECIPROCAL", "TRUNC", "POW", "CMPLT", "CMPNE", "CMPEQ", "XOR",
                "OR", "AND", "SHL", "SHR", "WHERE", "MULACC", "THREEFRY", "CAST", "BITCAST", "GEP", "VECTORIZE"),
    "#D8F9E4": ("RESHAPE", "PERMUTE", "EXPAND", "PAD", "SHRINK", "FLIP", "VIEW", "STACK", "UNROLL", "CONTRACT",
                "MSTACK", "MSELECT"),
    "#e0e0e0": ("CONST", "VCONST", "DEFINE_VAR", "BIND", "UNIQUE", "LUNIQUE", "DEVICE"),
    "#ffc0c0": ("LOAD",),
    "#87CEEB": ("STORE", "ASSIGN"),
    "#CEF9B7": ("INDEX", "GETADDR"),
    "#B0BDFF": ("BUFFER", "PARAM", "DEFINE_GLOBAL", "DEFINE_LOCAL", "DEFINE_REG", "DEFINE_ACC", "BUFFER_VIEW",
                "BUFFERIZE", "STAGE"),
    "#c8a0e0": ("RANGE", "END", "ENDRANGE", "SPECIAL", "IF", "ENDIF", "BARRIER", "AFTER", "GROUP", "BLOCK",
                "BLOCKSTART", "BLOCKEND", "BLOCKFORK", "BLOCKFINAL"),
    "#FF8A8A": ("REDUCE", "REDUCE_AXIS", "ALLREDUCE", "WMMA"),
    "#7fd6df": ("CALL", "FUNCTION", "KERNEL", "CUSTOM_FUNCTION", "LINEAR", "INS", "CUSTOM", "CUSTOMI"),
    "#d0d0d0": ("PROGRAM", "SOURCE", "BINARY", "NAME"),
    "#e0a0e0": ("COPY", "CONTIGUOUS", "CONTIGUOUS_BACKWARD", "DETACH", "UNSHARD"),
    "#ffffff": ("SINK", "NOOP"),
}
FILLS = {op: color for color, ops in _FAMILIES.items() for op in ops} | {ERROR_OP: ERROR_FILL}


class NodeLook:
    """Labels, colours and folding of the nodes of a session. Expects the node columns `op`, `dtype`, `src`, a node's
    argument and tag from `arg_of` and `tag_of`, what its label and text are cached by from `look_key`, and `text_of`,
    the release's ArgText."""

    op: list[str]
    dtype: list[str]
    src: list[tuple[int, ...]]
    text_of: ArgText

    def arg_of(self, n: int) -> Any:
        raise NotImplementedError

    def tag_of(self, n: int) -> Any:
        raise NotImplementedError

    def _look_init(self) -> None:
        self._labels: dict[Hashable, str] = {}
        self._texts: dict[Hashable, str] = {}
        self._foldable: dict[int, bool] = {}

    def look_key(self, n: int) -> Hashable:
        """Equal for nodes whose label, fill and text are equal (equal op, dtype, argument and tag)."""
        raise NotImplementedError

    def label(self, n: int) -> str:
        """Op, argument and dtype lines of node n (and its tag)."""
        key = self.look_key(n)
        hit = self._labels.get(key)
        if hit is None:
            arg = self.text_of.lines(self.arg_of(n))
            lines = [self.op[n], *(arg if arg != [self.dtype[n]] else ())]  # CAST's arg is its dtype
            if self.dtype[n] != "void":
                lines.append(self.dtype[n])
            if self.tag_of(n) is not None:
                lines.append(f"tag {self.text_of.short(self.tag_of(n), 1)}")
            hit = self._labels[key] = "\n".join(lines)
        return hit

    def fill(self, n: int) -> str:
        return FILLS.get(self.op[n], "#ffffff")

    def fold_rule(self, n: int) -> str:
        op = self.op[n]
        if op in FOLDED or (op == "STACK" and not self.src[n]):
            return "always"
        return "as_source" if op in BROADCAST else "never"

    def foldable(self, n: int) -> bool:
        hit = self._foldable.get(n)
        if hit is None:
            rule = self.fold_rule(n)
            hit = rule == "always" or (rule == "as_source" and bool(self.src[n]) and self.foldable(self.src[n][0]))
            self._foldable[n] = hit
        return hit

    def folded(self, n: int) -> tuple[str, str]:
        """What a constant shows in its user's box; a broadcast shows the constant it broadcasts."""
        while self.op[n] in BROADCAST and self.src[n]:
            n = self.src[n][0]
        return self.op[n], self.text_of.short(self.arg_of(n), 1)

    def text(self, n: int) -> str:
        key = self.look_key(n)
        hit = self._texts.get(key)
        if hit is None:
            hit = self._texts[key] = self._text(n)
        return hit

    def _text(self, n: int) -> str:
        parts = [self.op[n]]
        if self.dtype[n] != "void":
            parts.append(self.dtype[n])
        if self.arg_of(n) is not None:
            parts.append(self.text_of.short(self.arg_of(n)).replace("\n", " ")[:80])
        if self.tag_of(n) is not None:
            parts.append(f"tag={self.text_of.short(self.tag_of(n), 1)}")
        return " ".join(parts)
