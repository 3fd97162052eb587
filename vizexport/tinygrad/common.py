"""Small conversions shared by the profile and rewrites readers."""
from __future__ import annotations

import math
import re
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

import numpy as np

from ..compiled import compiled
from ..limits import capped
from ..pickles import brief, class_name, int_text
from ..records import INT64, Key
from ..text import unicode
from .releases import dtype_names, enum_table, traits
from .standins import ANY_DTYPE, get_field, has, n_fields

_SGR = re.compile(r"\x1b\[([0-9;]*)m")
_COLORS = {30: "black", 31: "red", 32: "green", 33: "yellow", 34: "blue", 35: "magenta", 36: "cyan", 37: "white",
           90: "gray", 91: "bright red", 92: "bright green", 93: "bright yellow", 94: "bright blue",
           95: "bright magenta", 96: "bright cyan", 97: "bright white"}


def strip_ansi(s: str) -> tuple[str, str | None]:
    """Name without ANSI SGR codes, and the first colour it used (None if plain)."""
    if "\x1b" not in s:
        return s, None
    color = None
    for m in _SGR.finditer(s):
        for code in m.group(1).split(";"):
            if code.isdigit() and int(code) in _COLORS and int(code) != 90:
                color = _COLORS[int(code)]
                break
        if color:
            break
    return _SGR.sub("", s), color


_PAD = ("000", "00", "0", "")


def text(x: Any) -> str:
    """A text field as read: the text itself, anything else (a corrupt or hostile pickle) as a short bounded repr."""
    return unicode(x) if type(x) is str else brief(x)


def int64(x: Any) -> int | None:
    """x if it is a plain int within int64 (what the model's columns hold), else None."""
    return x if type(x) is int and -INT64 <= x < INT64 else None


def plain_value(x: Any) -> int | str | None:
    """x as a plain int or str (stand-ins of either made plain), or None for anything else. An int past int64 (no
    tinygrad value is) becomes its short text: writers keep ints in int64 columns and varints."""
    if type(x) in (str, bool):
        return x
    if isinstance(x, int):
        return int(x) if -INT64 <= x < INT64 else int_text(x)
    return str(x) if isinstance(x, str) else None


def ns(us: Any) -> int:
    """Microseconds → integer nanoseconds, rounded half-even. tinygrad's Decimal µs arrive as their exact text
    (see pickles.DECIMAL_TEXT); the usual '123.456' form is parsed without building a Decimal. Anything but a
    number or its text, or a time beyond int64 ns, raises ValueError."""
    v = _ns(us)
    if -INT64 <= v < INT64:
        return v
    raise ValueError(f"timestamp out of range: {brief(us)} µs")


def _ns(us: Any) -> int:
    if type(us) is str:
        if us[-4:-3] == ".":  # the usual exactly-ns text: drop the point
            try:
                return int(us.replace(".", "", 1))
            except ValueError:
                pass
        whole, _, frac = us.partition(".")
        if len(frac) <= 3:
            try:
                return int(whole + frac + _PAD[len(frac)])
            except ValueError:
                pass
        try:
            us = Decimal(us)  # exponent form or sub-ns digits: exact rounding
        except ArithmeticError:  # decimal.InvalidOperation: not a number's text
            raise ValueError(f"not a timestamp: {brief(us)}") from None
    if type(us) is Decimal:
        if not us.is_finite():
            raise ValueError(f"not a timestamp: {us}")
        if us.adjusted() > 19:  # before int(): '1e999999999' would make a billion digits
            raise ValueError(f"timestamp out of range: {brief(str(us))} µs")
        return int(us.scaleb(3).to_integral_value())
    if type(us) is int:
        return us * 1000
    if type(us) is float and math.isfinite(v := us * 1000):
        return round(v)
    raise ValueError(f"not a timestamp: {brief(us)}")


_fast = compiled("vizexport.tinygrad._times")  # _exact_ns in C, or None: numpy's
BULK_MIN = 64  # numpy's fixed cost per call is that of `ns` on about this many texts (a graph batch has a few)


def ns_column(texts: Iterable, none: bool = True, array: bool = False) -> list[int | None] | np.ndarray:
    """`ns` of each timestamp (None stays None; with none=False it raises ValueError), the usual exactly-ns texts
    of a long column parsed in bulk. `array`: a column parsed in bulk is returned as its int64 array (for a caller
    that makes one: a million ints made and read back cost 40 ms)."""
    texts = list(texts)
    if len(texts) >= BULK_MIN and (out := _exact_ns(texts)) is not None:
        return out if array else out.tolist()
    if None in texts:  # e.g. ranges that never ended: the others may still go in bulk
        if not none:
            raise ValueError("None, not a timestamp")
        present = [x for x in texts if x is not None]
        if len(present) >= BULK_MIN and (out := _exact_ns(present)) is not None:
            it = iter(out.tolist())
            return [None if x is None else next(it) for x in texts]
    return [None if x is None else ns(x) for x in texts]


def _exact_ns(texts: list) -> np.ndarray | None:
    """ns of texts that are all in tinygrad's exactly-ns form ('123.456'); None if any text is not in that form. In
    C where built (_times.c), else numpy's (_exact_ns_numpy, its reference)."""
    if _fast is None:
        return _exact_ns_numpy(texts)
    out = np.empty(len(texts), np.int64)
    return out if _fast.exact_ns(texts, out) else None


def _exact_ns_numpy(texts: list) -> np.ndarray | None:
    """_exact_ns by numpy over the texts' joined bytes, a character position at a time for the texts of each
    width."""
    try:
        data = np.frombuffer("".join(texts).encode("ascii"), np.uint8)
    except (TypeError, UnicodeEncodeError):
        return None
    widths = np.fromiter(map(len, texts), np.int64, len(texts))
    starts = np.cumsum(widths) - widths
    out = np.empty(len(texts), np.int64)
    for w in np.flatnonzero(np.bincount(widths)).tolist():
        if not 5 <= w <= 19:  # an integer digit, the point and 3 decimals; at most 18 digits fit int64
            return None
        rows = np.flatnonzero(widths == w)
        at, value = starts[rows], np.zeros(len(rows), np.int64)
        for pos in range(w):
            chars = data[at + pos]
            if pos == w - 4:
                if (chars != ord(".")).any():
                    return None
                continue
            digits = chars - ord("0")  # uint8: anything but a digit wraps above 9
            if (digits > 9).any():
                return None
            value = value * 10 + digits
        out[rows] = value
    return out


def as_key(name: Any, payload: tuple[tuple, Any] | None = None) -> Key:
    """A ProfileRangeEvent/entry name: a plain str, or a TracingKey stand-in. Only what means something outside
    tinygrad is kept: link keys (names, program keys), a byte count or metadata text, the traceback. `payload`: the
    TracingKey's (link_keys(keys), traceback(tb)) where the caller has them already."""
    if type(name) is str:
        name_text, color = strip_ansi(name)
        return Key(capped(name_text), color)
    if class_name(name) != "TracingKey":
        return Key(text(name))
    d = name.__dict__
    name_text, color = strip_ansi(text(d.get("display_name", "")))
    name_text = capped(name_text)  # a crafted name may be megabytes (limits.NAME_CAP)
    keys, tb = (link_keys(d.get("keys")), traceback(d.get("tb"))) if payload is None else payload
    cat = d.get("cat")
    return Key(name_text, color, keys, plain_value(d.get("ret")), tb, None if cat is None else text(cat))


def link_keys(keys: Any) -> tuple[str | bytes, ...]:
    """The texts and byte strings of a TracingKey's keys (names and program keys: what links it elsewhere)."""
    return tuple(k for k in sequence(keys) if type(k) in (str, bytes))


def sequence(x: Any) -> tuple | list:
    """x if it is a tuple or list, else empty (a field that should hold several values)."""
    return x if type(x) in (tuple, list) else ()


def traceback(tb: Any) -> tuple[tuple[str, int, str, str], ...] | None:
    """A TracingKey's Python traceback as (file, line, function, code) entries; other entries are left out."""
    if type(tb) not in (tuple, list):
        return None
    return tuple((text(f), line if type(line) is int and 0 <= line < INT64 else -1, text(fn), text(code))
                 for f, line, fn, code in (e for e in tb if type(e) in (tuple, list) and len(e) == 4))


class DTypeText:
    """How a release prints a dtype: its repr without the `dtypes.` prefix ('float', 'uint', 'float.vec(4)',
    'float.ptr(1024)', 'half.ptr(16, AddrSpace.REG).vec(4)'). Pickled DTypes are REDUCE arguments: (priority,
    itemsize or bits, name, fmt[, count, scalar]); a PtrDType adds (base, local or addrspace, v[, size]); an
    ImageDType adds its shape."""

    def __init__(self, release: str) -> None:
        self.names = dtype_names(release)
        self.addrspaces = enum_table(release, "AddrSpace")
        self.vec_above_one = traits(release).vec_above_one
        self.ptr = traits(release).ptr_spelling
        self._cache: dict[int, tuple[Any, str]] = {}  # id(DType stand-in) → (it, text): a run has a few dtypes

    def __call__(self, dt: Any) -> str:
        if isinstance(dt, str):  # 0.11 alloc args store the text
            return dt.removeprefix("dtypes.")
        hit = self._cache.get(id(dt))
        if hit is None:
            hit = self._cache[id(dt)] = (dt, self._text(dt))
        return hit[1]

    def _text(self, dt: Any) -> str:
        cls = class_name(dt)
        if n_fields(dt) < 3:
            return text(dt)
        v = get_field(dt, "v", cls=ANY_DTYPE)
        vec = f".vec({v})" if type(v) is int and v != 1 else ""
        if cls == "ImageDType":
            shape = text(get_field(dt, "shape")) if has(dt, "shape") else ""
            return f"{text(get_field(dt, 'name'))}({shape}){vec}"
        if cls == "PtrDType":
            base = get_field(dt, "base")
            return f"{self(base) if class_name(base) == 'DType' else '?'}.ptr({self._ptr_args(dt)}){vec}"
        scalar = get_field(dt, "scalar", cls=ANY_DTYPE)
        scalar = scalar if class_name(scalar) == "DType" and n_fields(scalar) > 2 else dt
        name = text(get_field(scalar, "name", cls=ANY_DTYPE))
        count = get_field(dt, "count", cls=ANY_DTYPE)
        count = count if type(count) is int else 1
        shown = count > 1 if self.vec_above_one else count != 1
        return self.names.get(name, name) + (f".vec({count})" if shown else "")

    def _ptr_args(self, dt: Any) -> str:
        where = get_field(dt, "where")
        size = text(get_field(dt, "ptr_size")) if has(dt, "ptr_size") else "-1"
        if self.ptr == "local0":
            return "local=True" if where else ""
        if self.ptr == "local":
            return size + (", local=True" if where else "")
        space = self.addrspaces.get(where, "GLOBAL") if isinstance(where, int) else "GLOBAL"
        return size + (f", AddrSpace.{space}" if space != "GLOBAL" else "")


MAX_DTYPE_BITS = 1 << 20  # one element of a dtype (a vector of them too) is narrower: wider is a corrupt DType


def dtype_bits(dt: Any, bitsize: bool) -> int:
    """Size of one element in bits; `bitsize` says whether the pickle stored bits (>= 0.12) or bytes. 0 where the
    DType gives no size, or one no dtype has (negative, or past MAX_DTYPE_BITS): an unknown size."""
    size = get_field(dt, "size", cls=ANY_DTYPE)
    if type(size) is not int:
        return 0
    bits = size if bitsize else size * 8
    return bits if 0 <= bits <= MAX_DTYPE_BITS else 0
