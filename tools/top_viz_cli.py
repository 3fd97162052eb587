"""What tinygrad 0.14.0's own `python -m tinygrad.viz.cli -t` prints for every 0.14.0 input: the expected tables of
`vizexport top --by name` (tests/test_top_viz_cli.py; CI has no tinygrad, so they are stored).

Usage: python tools/top_viz_cli.py [PYTHON]   (PYTHON: a python with tinygrad==0.14.0 installed; default: the venv
of tools/tgvenv.py; writes tests/data/top_viz_cli.json)

Inputs: the sample, the fixtures /work/shared/fixtures/tinygrad/0.14.0*/ (../shared/fixtures from the checkout) and
the corpus sets tests/data/corpus/0.14.0-*. Per input, tinygrad's CLI lists the sources (`--list`), then for each
source that is a timeline (not a Memory counter) prints its top table whole, once as text and once as JSON:

    NO_COLOR=1 python -m tinygrad.viz.cli -t -1 -s SOURCE [--json] --profile-path P --rewrites-path R

With `-s`, a row's share is of that source's summed time (as `top`'s is of its device's). Stored per input and
source: the rows in tinygrad's order, each [name, count, time, share, rates, dur_ms] where time, share and rates are
the text tinygrad printed ("37.77us", "80.00%", {"GFLOPS": "25 GFLOPS", ...}) and dur_ms its JSON total.
"""
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "top_viz_cli.json"
FIXTURES = ROOT.parent / "shared" / "fixtures" / "tinygrad"
CORPUS = ROOT / "tests" / "data" / "corpus"
RELEASE = "0.14.0"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
NAME_PAD = 38  # viz.cli -t pads a row's name to this many columns
RATE_KEYS = ("FLOPS", "B/s mem", "B/s lds")


def inputs(tmp: Path) -> dict[str, tuple[Path, Path]]:
    """Input id → (profile.pkl, rewrites.pkl); corpus sets decompressed into `tmp`."""
    out = {"sample": (ROOT / "vizexport/data/sample/profile.pkl", ROOT / "vizexport/data/sample/rewrites.pkl")}
    for d in sorted(FIXTURES.glob(f"{RELEASE}*/")):
        out[f"fixture/{d.name}"] = (d / "profile.pkl", d / "rewrites.pkl")
    for d in sorted(CORPUS.glob(f"{RELEASE}-*/")):
        pair = []
        for f in ("profile.pkl", "rewrites.pkl"):
            (tmp / d.name).mkdir(exist_ok=True)
            (p := tmp / d.name / f).write_bytes(gzip.decompress((d / f"{f}.gz").read_bytes()))
            pair.append(p)
        out[f"corpus/{d.name}"] = (pair[0], pair[1])
    return out


def cli(python: str, paths: tuple[Path, Path], *args: str) -> str:
    cmd = [python, "-m", "tinygrad.viz.cli", *args, "--profile-path", str(paths[0]), "--rewrites-path", str(paths[1])]
    with tempfile.TemporaryDirectory() as tmp:
        env = {"PATH": "/usr/bin:/bin", "NO_COLOR": "1", "HOME": tmp, "TMPDIR": tmp, "CACHEDB": f"{tmp}/cache.db"}
        proc = subprocess.run(cmd, env=env, cwd=tmp, capture_output=True, text=True, timeout=600, check=False)
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)}: {proc.stderr.strip()[-500:]}")
    return ANSI.sub("", proc.stdout)


def parse_line(line: str, name: str) -> tuple[str, str, dict[str, str]]:
    """(time, share, rates) of a text row of `name`: fixed-width fields after the padded name, then the rates, each
    padded to 14 columns and joined by two spaces."""
    rest = line[max(NAME_PAD, len(name)):]
    time, share = rest[1:12].strip(), rest[21:28].strip()
    rates = [p.strip() for p in re.split(r"\s{2,}", rest[28:].strip()) if p.strip()]
    return time, share, {k: next(r for r in rates if r.endswith(" G" + k) or r.endswith(" T" + k))
                         for k in RATE_KEYS if any(r.endswith(k) for r in rates)}


def source_rows(python: str, paths: tuple[Path, Path], source: str) -> list[list]:
    js = [json.loads(x) for x in cli(python, paths, "-t", "-1", "-s", source, "--json").splitlines() if x.strip()]
    text = cli(python, paths, "-t", "-1", "-s", source).splitlines()
    assert len(js) == len(text), (source, len(js), len(text))
    rows = []
    for j, line in zip(js, text, strict=True):
        time, share, rates = parse_line(line, j["name"])
        rows.append([j["name"], j["count"], time, share, rates, j["dur_ms"]])
    return rows


def main() -> None:
    sys.path.insert(0, str(ROOT / "tools"))
    python = sys.argv[1] if len(sys.argv) > 1 else __import__("tgvenv").venv_python(RELEASE)
    out: dict = {"tinygrad": RELEASE, "command": "NO_COLOR=1 python -m tinygrad.viz.cli -t -1 -s SOURCE [--json] "
                 "--profile-path PROFILE --rewrites-path REWRITES", "inputs": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for key, paths in inputs(Path(tmp)).items():
            sources = [s for s in cli(python, paths, "--list").splitlines() if s and s != "ALL"
                       and not s.endswith(" Memory")]
            out["inputs"][key] = {s: source_rows(python, paths, s) for s in sources}
            print(f"{key:32} {len(sources)} sources: " + ", ".join(
                f"{s} {len(r)}" for s, r in out["inputs"][key].items()), flush=True)
    OUT.write_text(json.dumps(out, indent=None, separators=(",", ":")).replace('],["', '],\n["') + "\n")
    print(f"wrote {OUT.relative_to(ROOT)} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    os.environ.pop("PYTHONPATH", None)
    main()
