"""`vizexport top --by name` equals tinygrad 0.14.0's own `python -m tinygrad.viz.cli -t` row for row: per device
(and JIT graph track) its kernels in tinygrad's order, with their names, launch counts, total times, shares and
rates as tinygrad writes them; `--host` likewise per host track (TINY, USER, GC). On the sample, every 0.14.0
fixture (skipped where ../shared is absent) and every 0.14.0 corpus set. tinygrad's tables are
tests/data/top_viz_cli.json, printed by tinygrad itself (tools/top_viz_cli.py records the command)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import vizexport
from vizexport.analysis import KernelStats, KernelTable
from vizexport.devices import HOST
from vizexport.run import AnswerOptions, Run

from .answers import unpack
from .conftest import FIXTURES, ROOT
from .test_corpus import COMPARE

SAMPLE = Path(vizexport.__file__).parent / "data" / "sample"
EXPECTED = json.loads((ROOT / "tests" / "data" / "top_viz_cli.json").read_text())
KEYS = sorted(EXPECTED["inputs"])
RATES = (("FLOPS", "gflops"), ("B/s mem", "gbs"), ("B/s lds", "gbs_lds"))


def inputs(key: str, tmp: Path) -> tuple[Path, Path]:
    kind, _, name = key.partition("/")
    if kind == "sample":
        return SAMPLE / "profile.pkl", SAMPLE / "rewrites.pkl"
    if kind == "corpus":
        return unpack(name, tmp)
    folder = FIXTURES / "tinygrad" / name
    if not folder.is_dir():
        pytest.skip(f"../shared/fixtures/tinygrad/{name} not present")
    return folder / "profile.pkl", folder / "rewrites.pkl"


def time_to_str(t: float, w: int = 9) -> str:
    """tinygrad.helpers.time_to_str (0.14.0), as viz.cli -t calls it."""
    return next((f"{t * d:{w}.2f}{pr}" for d, pr in [(1, "s "), (1e3, "ms")] if t > 10 / d), f"{t * 1e6:{w}.2f}us")


def rate_to_str(k: str, v: int) -> str:
    """tinygrad.viz.cli.to_str (0.14.0) of a rate in units per second (viz.cli -t truncates it to an int first)."""
    return f"{v * 1e-9:.0f} G{k}" if v < 1e13 else f"{v * 1e-12:.0f} T{k}"


def as_tinygrad(k: KernelStats, printed: str | None = None) -> list:
    """A row as viz.cli -t -s DEVICE prints it: [name, count, time, share, rates]. The time is tinygrad's `printed`
    one where ours is within rounding of it: tinygrad sums float32 µs (durations of Decimal µs), we whole ns, so a
    total on a rounding boundary may print a hundredth apart (the corpus comparison's tolerance per launch)."""
    rates = {key: rate_to_str(key, int(v * 1e9)) for key, attr in RATES if (v := getattr(k, attr)) is not None}
    time = time_to_str(k.total_ns * 1e-9).strip()
    tol = k.launches * COMPARE.DUR_TOL_US * 1e3 + COMPARE.DUR_TOL_REL * k.total_ns
    if printed is not None and printed != time:
        scale = 1e3 if printed.endswith("us") else 1e6 if printed.endswith("ms") else 1e9
        if abs(float(printed.rstrip("usm")) * scale - k.total_ns) <= tol + scale * 0.005:  # half its last digit
            time = printed
    return [k.name, k.launches, time, f"{k.share:.2f}%", rates]


def per_source(rows: list[KernelStats], want: dict[str, list[list]]) -> dict[str, list[list]]:
    """Our rows per device as tinygrad prints them; `want`: tinygrad's, for the times it printed."""
    printed = {(s, r[0]): r[2] for s, rs in want.items() for r in rs}
    out: dict[str, list[list]] = {}
    for k in rows:
        out.setdefault(k.device, []).append(as_tinygrad(k, printed.get((k.device, k.name))))
    return out


def expected(key: str, host: bool) -> dict[str, list[list]]:
    """tinygrad's rows per source (without its JSON total), host sources or the others."""
    return {s: [r[:5] for r in rows] for s, rows in EXPECTED["inputs"][key].items() if (s in HOST) == host}


def table(key: str, tmp: Path, host: bool) -> KernelTable:
    profile, rewrites = inputs(key, tmp)
    run = Run.of(vizexport.load_profile(profile), vizexport.load_rewrites(rewrites),
                 answers=AnswerOptions(by="name", host=host))
    return run.kernel_table


@pytest.mark.parametrize("key", KEYS)
def test_top_by_name_equals_viz_cli_per_device(key: str, tmp_path: Path):
    t, want = table(key, tmp_path, False), expected(key, False)
    assert per_source(t.kernels + t.batches, want) == want
    # no device's shares pass 100 %: batches are apart from the kernels their entries are
    for dev in t.device_ns:
        assert sum(k.share for k in t.kernels if k.device == dev) == pytest.approx(100)
    assert not set(t.device_ns) & set(t.batch_ns)


@pytest.mark.parametrize("key", KEYS)
def test_top_host_equals_viz_cli_per_host_track(key: str, tmp_path: Path):
    t, want = table(key, tmp_path, True), expected(key, True)
    assert per_source(t.kernels, want) == want
    assert not t.batches and set(t.device_ns) <= set(HOST)


def test_the_expected_tables_cover_every_0_14_input():
    """Every 0.14.0 corpus set (and the sample) has tinygrad's tables, with device kernels and host spans."""
    sets = {f"corpus/{d.name}" for d in (ROOT / "tests" / "data" / "corpus").glob("0.14.0-*") if d.is_dir()}
    assert sets and sets | {"sample"} <= set(KEYS) and EXPECTED["tinygrad"] == "0.14.0"
    devices = {s for k in KEYS for s in expected(k, False)}
    assert {"NULL", "NULL Graph", "NULL:1:SDMA:0"} <= devices
    assert sum(len(r) for k in KEYS for r in expected(k, True).values()) > 500
