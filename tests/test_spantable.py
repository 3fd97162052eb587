"""records.SpanTable: a profile's spans as columns, and the Spans made from them on demand."""
from __future__ import annotations

import numpy as np
import pytest

import vizexport
from vizexport.devices import is_copy
from vizexport.records import Key, Span, SpanTable

from .conftest import ROOT

SAMPLE = ROOT / "vizexport" / "data" / "sample" / "profile.pkl"


def _spans() -> list[Span]:
    shared = Key("r_4", keys=("r_4",))
    return [Span("TINY", Key("schedule"), 100, 900), Span("AMD", shared, 200, 300, profile_key=b"\x01" * 8),
            Span("AMD", shared, 400, None),
            Span("AMD:SDMA:0", Key("copy 8, AMD <- CPU", ret=8), 500, 650, is_copy=True),
            Span("AMD", Key("e0"), 1000, 1100, graph=0), Span("AMD:1", Key("e1"), 1050, 0, graph=0)]


def test_rows_are_the_spans_put_in():
    spans = _spans()
    t = SpanTable.of(spans)
    assert len(t) == 6 and list(t) == spans and t[2] == spans[2] and t[-1] == spans[-1]
    assert t.rows(np.array([3, 1])) == [spans[3], spans[1]]
    assert t[2].en is None and t.en[2] == 400 and not t.ended[2]  # never ended: its end column holds its start
    assert t[1].key is t[2].key is spans[1].key and len(t.keys) == 5  # one code per Key object
    assert t.devices == ["TINY", "AMD", "AMD:SDMA:0", "AMD:1"] and t.profile_keys == [None, b"\x01" * 8]
    with pytest.raises(IndexError):
        t[6]


def test_by_device_and_where_device():
    t = SpanTable.of(_spans())
    by = t.by_device()
    assert list(by) == ["TINY", "AMD", "AMD:SDMA:0", "AMD:1"]  # in order of first appearance
    assert {d: rows.tolist() for d, rows in by.items()} == {"TINY": [0], "AMD": [1, 2, 4], "AMD:SDMA:0": [3],
                                                           "AMD:1": [5]}
    assert t.where_device(lambda d: d.startswith("AMD")).tolist() == [1, 2, 3, 4, 5]
    assert t.where_device(lambda d: d == "GC").tolist() == []


def test_copies_tell_rows_as_is_copy_tells_spans():
    """Flagged a copy, a result that is a byte count (a bool is an int too), or on a copy engine: each alone."""
    spans = [*_spans(), Span("AMD", Key("r_8", ret=True), 1200, 1300), Span("CPU:COPY", Key("x"), 1300, 1400),
             Span("AMD", Key("y", ret="12 B"), 1400, 1500)]
    t = SpanTable.of(spans)
    got = t.copies(np.arange(len(spans)))
    assert got.tolist() == [is_copy(s) for s in spans] == [False, False, False, True, False, False, True, True, False]
    assert t.copies(np.array([7, 3, 0])).tolist() == [True, True, False]
    assert SpanTable().copies(np.zeros(0, np.int64)).tolist() == []


def test_batch_extents():
    """A batch's first start and last end; an end of 0 counts as its start (as tinygrad's viewer draws it)."""
    t = SpanTable.of(_spans())
    st, en = t.batch_extents([[4, 5], [0], [1, 2, 3]])
    assert st.tolist() == [1000, 100, 200] and en.tolist() == [1100, 900, 650]
    assert [len(x) for x in t.batch_extents([])] == [0, 0]


def test_equality_is_by_content_not_codes():
    spans = _spans()
    a, b = SpanTable.of(spans), SpanTable.of(spans[::-1])
    assert a == SpanTable.of(list(spans)) and a != b and SpanTable.of(list(b)[::-1]) == a
    assert repr(a) == "SpanTable(6 spans on TINY, AMD, AMD:SDMA:0, AMD:1)"


def test_sample_spans_as_columns():
    """The sample's 610 spans (539 TINY, 47 USER, 24 on NULL devices, 15 of them graph entries) with their device
    clock offsets applied, and no Span object kept per event."""
    p = vizexport.load_profile(SAMPLE)
    t = p.spans
    assert isinstance(t, SpanTable) and len(t) == 610
    counts = {d: len(rows) for d, rows in t.by_device().items()}
    assert counts == {"USER": 47, "TINY": 539, "NULL": 11, "NULL:1": 5, "NULL:1:SDMA:0": 4, "NULL:SDMA:0": 4}
    assert int((t.graph >= 0).sum()) == 15 == sum(len(g.entries) for g in p.graphs)
    assert all(t.graph[i] == n for n, g in enumerate(p.graphs) for i in g.entries)
    assert t.st.dtype == np.int64 and (t.en >= t.st).all() and t.ended.all()


def test_read_without_host_spans():
    """`top` of device launches reads no host range: the device spans are the same rows, graph batches index them,
    and a timeline that would show host spans is refused rather than drawn without them."""
    from vizexport.tinygrad.profile import load_profile
    from vizexport.tinygrad.timeline import ALL_STAGES, build_timeline
    full, device = load_profile(SAMPLE), load_profile(SAMPLE, host=False)
    assert not device.host_spans and len(device.spans) == 24 and device.n_events == full.n_events == 643
    kept = full.spans.where_device(lambda d: d not in ("TINY", "USER", "GC"))
    assert list(device.spans) == full.spans.rows(kept)
    assert [device.spans.rows(g.entries) for g in device.graphs] == [full.spans.rows(g.entries) for g in full.graphs]
    assert device.points == full.points and device.release == full.release
    with pytest.raises(ValueError, match="without its host spans"):
        build_timeline(device, stages=ALL_STAGES)
