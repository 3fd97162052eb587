"""Release knowledge lives in one table (tinygrad/releases.py TRAITS) and stand-ins' positional fields in one module
(tinygrad/standins.py): readers ask traits and field names, and these tests find any code that goes back to release
names or `_args[k]`."""
from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

from vizexport.pickles import stub_class
from vizexport.tinygrad.common import DTypeText, dtype_bits
from vizexport.tinygrad.releases import NEWEST, RELEASES, TRAITS, traits
from vizexport.tinygrad.standins import UOpView, get_field, has, uop_view

from .conftest import ROOT

PACKAGE = ROOT / "vizexport"
POSITIONAL = re.compile(r"\b_args\s*\[")


def test_every_release_has_traits_and_others_read_as_master():
    assert set(TRAITS) == set(RELEASES) and NEWEST == RELEASES[-1] == "master"
    assert traits("0.99.0") is traits("unknown") is TRAITS["master"]
    assert traits("0.14.0") == traits("master") != traits("0.13.0")
    assert [r for r in RELEASES if traits(r).spec_counting is not None] == ["0.11.0", "0.12.0"]
    assert [r for r in RELEASES if traits(r).link_by_program_key] == ["0.14.0", "master"]
    assert [r for r in RELEASES if not traits(r).dtype_bits] == ["0.10.0", "0.10.1", "0.10.2", "0.10.3", "0.11.0"]


def string_literals(path: Path) -> list[tuple[int, str]]:
    """(line, value) of every plain string literal in a module (docstrings included: none is just a release)."""
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        if tok.type == tokenize.STRING and not tok.string.lstrip("rbRB").startswith(("f", "F")):
            value = ast.literal_eval(tok.string)
            if isinstance(value, str):
                out.append((tok.start[0], value))
    return out


@pytest.mark.parametrize("folder", ["tinygrad", "pickles"])
def test_readers_name_no_release(folder: str):
    """Outside releases.py no reader compares with a release name: it asks a trait."""
    found = [(p.name, line, v) for p in sorted((PACKAGE / folder).rglob("*.py")) if p.name != "releases.py"
             for line, v in string_literals(p) if v in RELEASES]
    assert not found


def test_no_positional_stand_in_reads():
    """Only the stand-ins' own module (pickles) and tinygrad/standins.py read `_args[k]`."""
    own = {PACKAGE / "pickles" / "__init__.py", PACKAGE / "tinygrad" / "standins.py"}
    found = [(str(p.relative_to(PACKAGE)), i) for p in sorted(PACKAGE.rglob("*.py")) if p not in own
             for i, line in enumerate(p.read_text().splitlines(), 1) if POSITIONAL.search(line)]
    assert not found


def test_dtype_fields_by_name_and_release_spelling():
    """A PtrDType stand-in read by field names; its text follows each release's spelling trait."""
    dtype, ptr = stub_class("tinygrad.dtype", "DType"), stub_class("tinygrad.dtype", "PtrDType")
    f32 = dtype(11, 32, "float", "f", 1, None)
    local = ptr(11, 32, "float", "f", 1, None, f32, 2, 1, 16)  # local=True (0.10.x) or AddrSpace.LOCAL (0.11+)
    assert get_field(local, "ptr_size") == 16 and get_field(local, "where") == 2 and not has(f32, "base", "PtrDType")
    assert DTypeText("0.10.0")(local) == "float.ptr(local=True)"
    assert DTypeText("0.10.2")(local) == "float.ptr(16, local=True)"
    assert DTypeText("0.14.0")(local) == DTypeText("0.99.0")(local) == "float.ptr(16, AddrSpace.LOCAL)"
    assert dtype_bits(f32, traits("0.12.0").dtype_bits) == 32 and dtype_bits(f32, traits("0.11.0").dtype_bits) == 256


def test_uop_view():
    uop = stub_class("tinygrad.uop.ops", "UOp")
    assert uop_view(uop(1, None, (), 5)) == UOpView(1, None, (), 5, None)
    assert uop_view(uop(1, None, (), 5, "t")).tag == "t" and uop_view(uop(1, None, ())) is None
