"""Every real pickle loads, and `vizexport info --json` reports what tinygrad itself computes for it.

tests/data/expected.json was computed by tools/expected_figures.py with the real tinygrad release that wrote each
file (in a throwaway venv), including, where the release has one, what tinygrad's own viewer reports.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import vizexport
from vizexport.records import to_json

from .conftest import EXPECTED, FIXTURES, ROOT, run_cli

SAMPLE = ROOT / "vizexport" / "data" / "sample"


def summarize(x: vizexport.Profile | vizexport.RewriteLog) -> dict:
    """The summary as `vizexport info --json` prints it."""
    return to_json(vizexport.summarize(x))


def path_of(key: str) -> Path:
    return SAMPLE / key.split("/", 1)[1] if key.startswith("sample/") else FIXTURES / key


def cases(kind: str) -> list:
    out = []
    for key in sorted(k for k in EXPECTED if k.endswith(".pkl")):
        is_profile = "rewrites" not in key
        if is_profile != (kind == "profile"):
            continue
        marks = [] if path_of(key).exists() else [pytest.mark.skip(reason=f"{key} not present")]
        out.append(pytest.param(key, id=key, marks=marks))
    return out


def check_release(summary: dict, expected: str) -> None:
    tg = summary["tinygrad"]
    if tg["confidence"] == "ambiguous":  # 0.10.1-0.10.3 profiles are byte-for-byte the same schema
        assert expected in tg["candidates"], tg
    else:
        assert tg["release"] == expected, tg


@pytest.mark.parametrize("key", cases("profile"))
def test_profile_figures(key: str):
    exp = EXPECTED[key]
    s = summarize(vizexport.load_profile(path_of(key)))
    check_release(s, exp["tinygrad"])
    assert s["n_events"] == exp["n_events"]
    assert s["events"] == exp["events"]
    assert s["span_ns"] == exp["span_ns"]
    assert s["memory_peak"] == exp["memory_peak"]
    assert s["unknown_classes"] == {}
    viewer = exp.get("viewer")
    if viewer:  # tinygrad's own viewer: memory track peaks equal ours
        assert {t.removesuffix(" Memory"): p for t, p in viewer["track_peaks"].items()} == s["memory_peak"]


@pytest.mark.parametrize("key", cases("rewrites"))
def test_rewrites_figures(key: str):
    exp = EXPECTED[key]
    s = summarize(vizexport.load_rewrites(path_of(key)))
    check_release(s, exp["tinygrad"])
    for k in ("contexts", "rewrites", "matches", "match_records"):
        assert s[k] == exp[k], k


def test_sqtt_fixture_records():
    """AMD captures: SQTT blobs, PMC schedules and code objects come through intact."""
    f = FIXTURES / "sqtt" / "gfx1100" / "profile_gemm_run_0.pkl"
    if not f.exists():
        pytest.skip("sqtt fixtures not present")
    p = vizexport.load_profile(f)
    sqtt = [c for c in p.captures if c.kind == "sqtt"]
    pmc = [c for c in p.captures if c.kind == "pmc"]
    assert len(sqtt) == 6 and {c.se for c in sqtt} == set(range(6)) and all(c.blob for c in sqtt)
    assert len(pmc) == 1 and pmc[0].sched[1].name == "SQ_INSTS_VALU" and pmc[0].sched[1].size == 384
    assert len(p.programs) == 1 and p.programs[0].name == "r_32_32_16_2" and p.programs[0].lib[:4] == b"\x7fELF"
    amd = next(d for d in p.devices if d.device == "AMD")
    assert amd.props["gfx_target_version"] // 1000 == 110


@pytest.mark.parametrize("key", ["tinygrad/0.14.0-null/profile.pkl", "tinygrad/HEAD/rewrites.pkl",
                                 "tinygrad/0.10.0/rewrites.pkl"])
def test_info_json_cli(key: str):
    f = path_of(key)
    if not f.exists():
        pytest.skip(f"{key} not present")
    r = run_cli("info", "--json", f)
    assert r.returncode == 0, r.stderr
    (s,) = json.loads(r.stdout)
    check_release(s, EXPECTED[key]["tinygrad"])
    assert s["file"] == str(f)


def test_master_vs_0140_decided_by_content():
    """HEAD and 0.14.0 share a schema but not Ops numbers: the CONST leaves decide, and say so."""
    head, rel = FIXTURES / "tinygrad" / "HEAD" / "rewrites.pkl", FIXTURES / "tinygrad" / "0.14.0" / "rewrites.pkl"
    if not head.exists():
        pytest.skip("fixtures not present")
    a, b = vizexport.load_rewrites(head), vizexport.load_rewrites(rel)
    assert (a.release.name, b.release.name) == ("master", "0.14.0")
    assert "constant nodes" in a.release.reason and a.release.candidates == ("0.14.0", "master")
    assert {u.op_name for u in a.uops.values() if not u.src and type(u.arg) is int and u.dtype == "int"} == {"CONST"}
    forced = vizexport.load_rewrites(head, tinygrad_version="0.14.0")
    assert forced.release.confidence == "override"
    assert sum(u.op_name == "CONST" for u in forced.uops.values()) < sum(u.op_name == "CONST" for u in a.uops.values())
