"""The pickles a command reads when it is named none: tinygrad's latest, where it writes them (tinygrad.locations),
as tinygrad's own viewer loads them by default. The command says on stderr which it took."""
from __future__ import annotations

import time
from pathlib import Path

from .errors import InputError
from .text import MESSAGE_CHARS, shown
from .tinygrad.locations import KINDS, PROFILE, REWRITES, WRITES, Found, latest, names, temp_folder

# per command: the kinds it needs, and those it reads too when there
NEEDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "convert": ((), KINDS), "info": ((), KINDS), "top": ((PROFILE,), (REWRITES,)),
    "report": ((PROFILE,), (REWRITES,)), "show": ((REWRITES,), ()), "open": ((PROFILE,), ()),
    "history": ((PROFILE,), (REWRITES,)),
}
_AGES = ((86400, "days"), (3600, "h"), (60, "min"), (1, "s"))


def age_text(seconds: float) -> str:
    """'12 s', '5 min', '3 h', '2 days' (whole units, rounded down)."""
    s = max(0, int(seconds))
    return next((f"{s // size} {unit}" for size, unit in _AGES if s >= size), "0 s")


def latest_inputs(command: str, folder: Path | None = None) -> tuple[list[Path], str]:
    """The latest profile and rewrites trace the command reads (profile first), and the line that says which;
    InputError, naming the folder and the files looked for, when one it needs is not there (or none is)."""
    need, may = NEEDS[command]
    folder = temp_folder() if folder is None else folder
    found = {k: f for k in (*need, *may) if (f := latest(k, folder)) is not None}
    missing = [k for k in need if k not in found] or ([] if found else list(may))
    if missing:
        looked = "; ".join(f"{' or '.join(names(k))}, which tinygrad writes with {WRITES[k]}" for k in missing)
        example = "REWRITES.pkl" if need == (REWRITES,) else "PROFILE.pkl"
        raise InputError(f"{folder}: no tinygrad pickle to read (looked for {looked}); name one: vizexport "
                         f"{command} {example}")
    taken = [found[k] for k in KINDS if k in found]
    return [f.path for f in taken], taken_line(command, taken)


def taken_line(command: str, taken: list[Found], now: float | None = None) -> str:
    """`vizexport top: tinygrad's latest: /tmp/profile.pkl.me (written 2 min ago), …` (shown: a path is data)."""
    now = time.time() if now is None else now
    files = ", ".join(f"{f.path} (written {age_text(now - f.mtime)} ago)" for f in taken)
    return shown(f"vizexport {command}: tinygrad's latest: {files}", MESSAGE_CHARS)
