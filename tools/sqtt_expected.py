"""Expected SQTT/PMC figures for the tests → tests/data/sqtt_expected.json.

- From the fact sheet (sqtt-format.md §13, checked against tinygrad 0.14.0's own decoder, its §14): per file the
  acceptance figures, packets per blob and the wave lists.
- From tinygrad 0.14.0 itself (tinygrad.viz.serve.unpack_pmc, run in a venv made by tools/tgvenv.py): per PMC record
  of each fixture, every counter's sum and the derived utilisation strings.

A copy, so that the tests run where ../shared is absent (they then skip the fixture cases).

Usage: python tools/sqtt_expected.py [--doc ../shared/docs/sqtt-format.md] [--fixtures ../shared/fixtures/sqtt]
"""
import argparse
import dataclasses
import json
import pickle
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))
from tgvenv import venv_python  # noqa: E402 (tools/ is not a package)

COLUMNS = ["blobs", "itrace", "packets", "waves", "traced_waves", "issues", "other_inst", "viz_events",
           "map_insts", "marker_pairs", "first_wavestart", "last_waveend", "last_packet"]
WAVE = re.compile(r"k(\d+)/SE(\d+) cu(\d+) s(\d+) w(\d+) (\d+)–(\d+)(?: \[(\d+)\])?")


def parse(text: str) -> dict:
    out: dict = {}
    for m in re.finditer(r"^\| (gfx\w+/profile_\w+) \| (\d+) \((\d+)\) \| (.*) \|$", text, re.M):
        vals = [int(m.group(2)), int(m.group(3))] + [int(x) for x in m.group(4).split(" | ")]
        out[m.group(1)] = dict(zip(COLUMNS, vals, strict=True))
    for m in re.finditer(r"^\| (gfx\w+/profile_\w+) \| ([\d, ]+) \|$", text, re.M):
        out[m.group(1)]["packets_per_blob"] = [int(x) for x in m.group(2).split(",")]
    for m in re.finditer(r"^\| (gfx\w+/profile_\w+) \| ((?:traced only: )?k\d.*) \|$", text, re.M):
        waves = [{"kern": int(w[0]), "se": int(w[1]), "cu": int(w[2]), "simd": int(w[3]), "slot": int(w[4]),
                  "start": int(w[5]), "end": int(w[6]), "issues": int(w[7]) if w[7] else None}
                 for w in WAVE.findall(m.group(2))]
        out[m.group(1)]["wave_list"] = {"traced_only": m.group(2).startswith("traced only"), "waves": waves}
    return out


TG_PMC = """
import json, pickle, sys, types
from tinygrad.viz.serve import unpack_pmc
out = []
for blob, sched in pickle.load(open(sys.argv[1], "rb")):
    rows = unpack_pmc(types.SimpleNamespace(blob=blob, sched=[types.SimpleNamespace(**s) for s in sched]))["rows"]
    out.append({r[0]: r[1] for r in rows})
print(json.dumps(out))
"""


def tinygrad_pmc(fixtures: Path) -> dict[str, list[dict]]:
    """Per fixture, tinygrad's PMC table (counter → sum, metric → text) of each PMC record, in file order."""
    import vizexport

    records, keys = [], []
    for f in sorted(fixtures.glob("*/*.pkl")):
        for c in vizexport.load_profile(f).captures:
            if c.kind == "pmc":
                records.append((bytes(c.blob), [dataclasses.asdict(s) for s in c.sched]))
                keys.append(f"{f.parent.name}/{f.stem}")
    with tempfile.NamedTemporaryFile(suffix=".pkl") as tmp:
        tmp.write(pickle.dumps(records))
        tmp.flush()
        r = subprocess.run([venv_python("0.14.0"), "-c", TG_PMC, tmp.name], capture_output=True, text=True, check=True)
    out: dict[str, list[dict]] = {}
    for key, table in zip(keys, json.loads(r.stdout), strict=True):
        out.setdefault(key, []).append(table)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--doc", type=Path, default=ROOT.parent / "shared" / "docs" / "sqtt-format.md")
    ap.add_argument("--fixtures", type=Path, default=ROOT.parent / "shared" / "fixtures" / "sqtt")
    a = ap.parse_args()
    figures = parse(a.doc.read_text())
    for key, tables in tinygrad_pmc(a.fixtures).items():
        figures[key]["pmc"] = tables
    dest = ROOT / "tests" / "data" / "sqtt_expected.json"
    dest.write_text(json.dumps(figures, indent=1) + "\n")
    print(f"{len(figures)} files → {dest}")


if __name__ == "__main__":
    main()
