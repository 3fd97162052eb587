"""Helpers shared by the corpus workloads (run inside a tinygrad venv by tools/make_corpus.py, never by vizexport).

Each workload is a list of named steps; a failing step is reported and the workload goes on, so one release's
missing API costs only that step. Every step prints one line `[corpus-step] {"step", "ok", "error"}` on stdout.
"""
import gc
import json
import os

STEP_TAG = "[corpus-step]"
ERROR_CHARS = 300

if os.environ.get("CORPUS_NO_EXECV"):  # 0.11 may exec its viz server at exit: keep the process
    os.execv = lambda *a, **k: print("[corpus] suppressed os.execv")


def device(index: int = 0) -> str:
    """The device under test ($CORPUS_DEVICE, e.g. NULL or CPU), or its index-th instance (NULL:1)."""
    dev = os.environ.get("CORPUS_DEVICE", "NULL")
    return dev if index == 0 else f"{dev}:{index}"


def step(name: str, fn) -> bool:
    """Run fn(); report its outcome on one line; never raise."""
    try:
        fn()
        ok, error = True, None
    except Exception as e:
        ok, error = False, f"{type(e).__name__}: {e}"[:ERROR_CHARS]
    print(STEP_TAG, json.dumps({"step": name, "ok": ok, "error": error}), flush=True)
    return ok


def marker(name: str, color: str = "blue") -> None:
    """A profiler marker (tinygrad 0.12+ has profile_marker; older releases fail this step)."""
    from tinygrad.helpers import profile_marker
    profile_marker(name, color=color)


def collect() -> None:
    """A full garbage collection: frees dropped buffers and, with DEBUG_GC=1, records a GC event."""
    gc.collect()
