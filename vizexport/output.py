"""Output files and folders appear whole or not at all: written to a temporary beside the target, then renamed.

Temporaries have unpredictable names (`.NAME.PID.XXXXXXXX.part`) and are created exclusively, so that a symlink
planted under a name we could use is never followed. An output folder carries a stamp (STAMP) listing the files we
wrote: an existing folder is replaced only if it is empty or stamped and holds nothing else, and of the old folder
only the files its stamp lists (and the folders they leave empty) are deleted."""
from __future__ import annotations

import errno
import json
import os
import re
import shutil
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import BinaryIO

from ._version import __version__
from .errors import InputError
from .limits import counted_file, sync_output

TMP_SUFFIX = ".part"  # temporary files and folders end so; an interrupted run's leftovers can be found by it
OLD_SUFFIX = ".old"  # the folder holding a replaced output until its files are deleted
STAMP = ".vizexport.json"  # in every output folder: the vizexport version and the files it wrote
STALE_SECONDS = 600  # a temporary of a dead process is removed once this old (see clean_stale)
_TRIES = 100  # temporary names tried before giving up (each taken one was planted or left by a live run)
# O_EXCL: never open an existing name (a planted symlink included); O_NOFOLLOW says so again where it exists
_CREATE = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
           | getattr(os, "O_BINARY", 0))
_OURS = r"\.(\d+)\.[a-z0-9_]{8}(\.part|\.old)"  # what follows `.NAME` in our temporaries' names (tempfile's too)
Progress = Callable[[int, int], None]  # progress(done, total) of a long write, e.g. to drive a progress bar


def _tmp_prefix(path: Path) -> str:
    return f".{path.name}.{os.getpid()}."


@contextmanager
def atomic_file(path: Path) -> Iterator[BinaryIO]:
    """A file to write `path` through. Lean, as a run can write tens of thousands of small files: the temporary
    gets the usual permissions (mkstemp's are private) and the folder is made only when missing."""
    fd, tmp = _create(path)
    try:
        with counted_file(fd) as f:  # its bytes count in the command's output budget (limits)
            yield f
        sync_output()
        os.replace(tmp, path)  # a symlink at `path` itself is replaced, its target untouched
    except BaseException:
        os.unlink(tmp)
        raise


def _create(path: Path) -> tuple[int, str]:
    """A new temporary file beside `path`, opened for writing: (descriptor, name)."""
    made = False
    for _ in range(_TRIES):
        tmp = f"{path.parent}/{_tmp_prefix(path)}{os.urandom(4).hex()}{TMP_SUFFIX}"
        try:
            return os.open(tmp, _CREATE, 0o666), tmp
        except FileExistsError:  # planted, or a live run's: another name
            continue
        except FileNotFoundError as e:
            if made:
                raise _named(e, path) from None
            made = True
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as e2:
                raise _named(e2, path) from None
        except OSError as e:
            raise _named(e, path) from None
    raise OSError(errno.EEXIST, "cannot write: every temporary name tried is taken", str(path))


def _named(e: OSError, path: Path) -> OSError:
    """The error named by the file the user asked for, not by the temporary one."""
    return OSError(e.errno, f"cannot write: {e.strerror}", str(path))


def write_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` via a temporary file in the same folder: readers never see a partial file."""
    with atomic_file(path) as f:
        f.write(data)


# ---- folders ----

@contextmanager
def atomic_folder(path: Path) -> Iterator[Path]:
    """A folder to build `path` in: a private temporary sibling that replaces `path` only once complete and stamped
    (an error leaves `path` as it was). `path` must be new, an empty folder, or an earlier stamped output holding
    only the files it lists (check_folder). A symlink to a folder builds that folder; the link stays."""
    real = check_folder(path)
    real.parent.mkdir(parents=True, exist_ok=True)
    clean_stale(real)
    tmp = Path(tempfile.mkdtemp(prefix=_tmp_prefix(real), suffix=TMP_SUFFIX, dir=real.parent))
    try:
        yield tmp
        write_stamp(tmp)
        os.chmod(tmp, 0o777 & ~_umask())  # as a folder made with mkdir would be (private while it was built)
        _swap(tmp, real)
    except OSError as e:  # named by the folder the user asked for, not by its temporary
        shutil.rmtree(tmp, ignore_errors=True)
        raise _outside(e, tmp, path) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _outside(e: OSError, tmp: Path, path: Path) -> OSError:
    """`e` with every path inside `tmp` shown inside `path` instead."""
    def shown(name: object) -> object:
        return str(name).replace(str(tmp), str(path).rstrip("/\\"), 1) if name is not None else None
    return OSError(e.errno, e.strerror, shown(e.filename), None, shown(e.filename2)) if e.errno else e


def check_folder(path: Path) -> Path:
    """The real folder an output `path` names, once checked that it may be replaced; else InputError (nothing is
    touched). Cheap enough to call before the work, as the command does, and again when it starts."""
    path = Path(path)
    real = Path(os.path.realpath(path))
    _not_current(path, real)
    if path.is_symlink() and not real.is_dir():
        raise InputError(f"{path}: is a symbolic link to something other than a folder (name a folder)")
    if not os.path.lexists(real):
        return real
    if not real.is_dir():
        raise InputError(f"{path}: exists and is not a folder (choose a new or empty folder)")
    files, dirs = tree(real)
    if not files and not dirs:
        return real
    listed = read_stamp(real)
    if listed is None:
        raise InputError(f"{path}: exists and is not an empty folder or an earlier vizexport output (it has no "
                         f"{STAMP} stamp; choose a new or empty folder)")
    extra = unlisted(files, dirs, listed)
    if extra:
        more = f" and {len(extra) - 1} more" if len(extra) > 1 else ""
        raise InputError(f"{path}: holds {extra[0]}{more}, which vizexport did not write (nothing was changed: move "
                         "them away or choose another folder)")
    return real


def _not_current(path: Path, real: Path) -> None:
    """Refuse the current folder, the root and any folder holding the current one: they cannot be swapped."""
    try:
        cwd = Path(os.path.realpath(os.getcwd()))
    except OSError:  # the current folder was deleted: it is none of ours
        cwd = None
    if real == real.parent or (cwd is not None and (real == cwd or real in cwd.parents)):
        raise InputError(f"{path}: cannot replace the current folder or one holding it (name another folder)")


def tree(root: Path) -> tuple[list[str], list[str]]:
    """Everything under `root` as relative POSIX paths: (files, folders). A symlink counts as a file: never
    followed."""
    files, dirs, todo = [], [], [""]
    while todo:
        rel = todo.pop()
        with os.scandir(root / rel) as it:
            for e in it:
                name = f"{rel}/{e.name}" if rel else e.name
                if e.is_dir(follow_symlinks=False):
                    dirs.append(name)
                    todo.append(name)
                else:
                    files.append(name)
    return files, dirs


def unlisted(files: list[str], dirs: list[str], listed: set[str]) -> list[str]:
    """What an output folder holds that its stamp does not list (folders that hold no listed file included)."""
    holders = {p for f in listed for p in _parents(f)}
    return sorted([f for f in files if f not in listed and f != STAMP] + [d for d in dirs if d not in holders])


def _parents(rel: str) -> Iterator[str]:
    i = rel.find("/")
    while i >= 0:
        yield rel[:i]
        i = rel.find("/", i + 1)


def read_stamp(folder: Path) -> set[str] | None:
    """The files an output folder's stamp lists, or None when it has no readable stamp."""
    try:
        with open(folder / STAMP, "rb", opener=_no_follow) as f:
            stamp = json.loads(f.read(1 << 26))
    except (OSError, ValueError):
        return None
    files = stamp.get("files") if isinstance(stamp, dict) else None
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        return None
    return set(files)


def _no_follow(name: str, flags: int) -> int:
    return os.open(name, flags | getattr(os, "O_NOFOLLOW", 0))


def write_stamp(folder: Path) -> None:
    """folder/STAMP: the vizexport version and every file in `folder` (what a later run may delete)."""
    files = sorted(tree(folder)[0])
    stamp = {"vizexport": __version__, "files": files}
    write_atomic(folder / STAMP, (json.dumps(stamp, indent=0) + "\n").encode())


def _swap(tmp: Path, real: Path) -> None:
    """Move the built folder in; the old one goes only once the new one is in place."""
    if not os.path.lexists(real):
        os.rename(tmp, real)
        return
    holder = Path(tempfile.mkdtemp(prefix=_tmp_prefix(real), suffix=OLD_SUFFIX, dir=real.parent))
    old = holder / real.name
    try:
        os.rename(real, old)
    except BaseException:
        holder.rmdir()
        raise
    try:
        os.rename(tmp, real)
    except BaseException:
        os.rename(old, real)
        holder.rmdir()
        raise
    remove_ours(old)
    try:
        old.rmdir()
        holder.rmdir()
    except OSError:  # something appeared since the check: kept
        warnings.warn(f"{real}: the replaced output kept files vizexport did not write; they are in {old}",
                      stacklevel=3)


def remove_ours(folder: Path) -> None:
    """Delete the files `folder`'s stamp lists (and the stamp), then the folders that leaves empty."""
    listed = read_stamp(folder) or set()
    files, dirs = tree(folder)
    for f in files:
        if f in listed or f == STAMP:
            os.unlink(folder / f)
    for d in sorted(dirs, reverse=True):  # a folder after everything in it
        with suppress(OSError):  # not empty: something not ours is in it
            (folder / d).rmdir()


def clean_stale(path: Path) -> None:
    """Remove the temporaries (`.NAME.PID.XXXXXXXX.part`, and `.old` holders once NAME is back) that runs killed
    while writing `path` left beside it. Only a dead process's, and only once STALE_SECONDS old: the process test is
    exact on this machine, the age spares a run of another machine writing to a shared folder as it starts."""
    ours = re.compile(re.escape(f".{path.name}") + _OURS)
    try:
        entries = list(os.scandir(path.parent))
    except OSError:
        return
    for e in entries:
        m = ours.fullmatch(e.name)
        if m is None or not _stale(e, int(m.group(1))) or (m.group(2) == OLD_SUFFIX and not path.exists()):
            continue
        if e.is_dir(follow_symlinks=False):
            shutil.rmtree(e.path, ignore_errors=True)
        else:
            os.unlink(e.path)  # a symlink itself, never its target


def _stale(e: os.DirEntry, pid: int) -> bool:
    try:
        if time.time() - e.stat(follow_symlinks=False).st_mtime < STALE_SECONDS:
            return False
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return True
    except OSError:  # alive (another user's), or gone from under us
        return False
    return False  # alive


def remove_leftovers(root: Path) -> None:
    """Delete the temporary files an interrupted run (its forked workers included) left under `root`."""
    ours = re.compile(r"\..+" + _OURS)
    for p in root.rglob(f".*{TMP_SUFFIX}"):
        if ours.fullmatch(p.name) and not p.is_dir():
            p.unlink(missing_ok=True)


_mask: int | None = None


def _umask() -> int:
    """The process's umask (read once: reading it means setting it)."""
    global _mask
    if _mask is None:
        _mask = os.umask(0)
        os.umask(_mask)
    return _mask


# ---- names ----

# names Windows gives to devices, whatever the extension or case (COM0/LPT0 too, since Windows 11)
RESERVED = frozenset({"con", "prn", "aux", "nul", *(f"{d}{i}" for d in ("com", "lpt") for i in range(10))})


def slug(name: str, width: int = 48) -> str:
    """A file-name-safe form of `name` on every OS: runs of other characters become '-', no leading or trailing '.'
    or '-', at most `width` characters (plus a leading '_' that a Windows device name gets)."""
    s = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")
    s = s[:width].rstrip("-.") or "unnamed"
    return "_" + s if s.split(".", 1)[0].lower() in RESERVED else s
