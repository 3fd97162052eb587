"""Untrusted pickles: every global outside the allow-list is refused before anything runs."""
from __future__ import annotations

import builtins
import io
import os
import pickle
import pickletools
import subprocess
from decimal import Decimal
from pathlib import Path

import pytest

import vizexport
from vizexport.pickles import InputError

from .conftest import run_cli


class Evil:
    """Pickles as a call of `fn(*args)`: what an attacker's profile.pkl would contain."""

    def __init__(self, fn, *args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return self.fn, self.args


def payloads(target: Path) -> dict[str, object]:
    touch = f"touch {target}"
    return {
        "posix.system": Evil(os.system, touch),
        "builtins.eval": Evil(builtins.eval, f"open({str(target)!r}, 'w')"),
        "builtins.exec": Evil(builtins.exec, f"open({str(target)!r}, 'w')"),
        "subprocess.check_call": Evil(subprocess.check_call, ["touch", str(target)]),
        "builtins.__import__": Evil(builtins.__import__, "os"),
        "io.open": Evil(open, str(target), "w"),
        "posix.remove": Evil(os.remove, str(target)),
    }


def wrap_in_profile(obj: object) -> bytes:
    """A list like a profile's, with the payload after an allowed global (so refusal is not just of the first one)."""
    return pickle.dumps([Decimal("1.5"), obj], protocol=4)


@pytest.mark.parametrize("name", list(payloads(Path("/x"))))
def test_refused_before_running(tmp_path: Path, name: str):
    target = tmp_path / "pwned"
    data = wrap_in_profile(payloads(target)[name])
    assert name.split(".")[-1].encode() in data  # the pickle really names the dangerous global
    f = tmp_path / "evil.pkl"
    f.write_bytes(data)
    with pytest.raises(InputError, match=f"refused global {name.replace('.', '[.]')}"):
        vizexport.load_profile(f)
    r = run_cli("info", f)
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert str(f) in r.stderr and f"refused global {name}" in r.stderr
    assert not target.exists(), "the payload ran"


def test_unpickled_normally_it_would_run(tmp_path: Path):
    """Control: the same bytes do create the file under plain pickle.loads, so the test above can fail."""
    target = tmp_path / "pwned"
    pickle.loads(wrap_in_profile(payloads(target)["posix.system"]))
    assert target.exists()


def test_global_inside_tinygrad_state(tmp_path: Path):
    """A payload in the BUILD state of a tinygrad stand-in is refused too (GLOBAL opcode, protocol 2)."""
    target = tmp_path / "pwned"
    inner = pickle.dumps(Evil(os.system, f"touch {target}"), protocol=2)
    # hand-written stream: tinygrad.helpers.ProfileRangeEvent via GLOBAL, state {'device': <payload>}
    body = inner[2:-1]  # strip PROTO and STOP of the payload
    stream = (b"\x80\x02" + b"ctinygrad.helpers\nProfileRangeEvent\n" + b")\x81" + b"}" + b"X\x06\x00\x00\x00device"
              + body + b"sb" + b"." )
    pickletools.dis(io.BytesIO(stream), out=io.StringIO())  # well-formed
    f = tmp_path / "evil.pkl"
    f.write_bytes(stream)
    r = run_cli("info", f)
    assert r.returncode == 1 and "refused global posix.system" in r.stderr
    assert not target.exists()


def test_stand_ins_are_inert(tmp_path: Path):
    """tinygrad classes never import tinygrad: a module that cannot exist loads as a stand-in."""
    stream = b"\x80\x04]\x94(ctinygrad.nonexistent_module\nProfileRangeEvent\n)\x81}(\x8c\x06device\x8c\x03AMDube."
    f = tmp_path / "p.pkl"
    f.write_bytes(stream)
    with pytest.raises(InputError, match="unknown tinygrad release"):
        vizexport.load_profile(f)  # right field set is missing ('st'), but nothing was imported
    import sys
    assert "tinygrad" not in sys.modules
