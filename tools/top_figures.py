"""Per-kernel totals of every fixture profile as the REAL tinygrad release that wrote it shows them, for `vizexport
top`'s tests (the corpus sets carry the same figures in their figures.json.gz).

Usage: python tools/top_figures.py   (rerunnable; writes tests/data/top_expected.json; venvs via tools/tgvenv.py)

Each profile (with its rewrites.pkl where the fixture has one) is loaded by that release's own viewer in a subprocess
of its venv (tools/corpus/viewer_figures.py does the loading and decoding, as for the corpus). Output per fixture key
("tinygrad/0.14.0-null/profile.pkl", "sample/profile.pkl"), in the corpus figures' layout: "tracks" {track: [[name
(ANSI codes removed), start µs since start_us, dur µs]]} of every track the viewer draws but the host's (TINY, USER,
GC), "markers" [[name, µs since start_us]], "start_us", "tinygrad" (the release); or "tinygrad": null and "reason"
where no release's viewer shows the profile.
"""
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ROOT / "tools"
OUT = ROOT / "tests" / "data" / "top_expected.json"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
HOST = ("TINY", "USER", "GC")


def child(profile: str, rewrites: str) -> dict:
    """Inside the release's venv: its viewer's profile figures, summed per (track, name)."""
    sys.path.insert(0, str(TOOLS / "corpus"))
    import viewer_figures as vf
    from tinygrad.viz import serve
    if not hasattr(serve, "get_profile"):
        raise RuntimeError("this release's tinygrad.viz.serve has no get_profile (its viewer draws no profile)")
    kind = vf.family(serve)
    v = vf.Viewer(serve, kind, vf.load(rewrites))
    events = vf.load(profile)
    prof = {"bytepack": lambda: vf.profile_v13(serve, v, events), "bytepack12": lambda: vf.profile_v12(serve, events),
            "json": lambda: vf.profile_v11(serve, v, events)}[kind]()
    tracks = {track: [[ANSI.sub("", name), st, dur] for name, st, dur, _nums in evs]
              for track, evs in prof["tracks"].items() if track not in HOST}
    return {"tracks": tracks, "markers": [[ANSI.sub("", m), ts] for m, ts in prof["markers"]],
            "start_us": prof["start_us"]}


def fixtures() -> dict:
    sys.path.insert(0, str(TOOLS))
    from expected_figures import SAMPLE, pickles
    out = {k: p for k, p in pickles().items() if Path(k).name.startswith("profile")}
    return {k: (p, p.with_name("rewrites.pkl") if p.with_name("rewrites.pkl").exists() else None)
            for k, p in out.items() if not k.startswith("sample/")} | {"sample/profile.pkl": (
                SAMPLE / "profile.pkl", SAMPLE / "rewrites.pkl")}


def run(release: str, profile: Path, rewrites: Path | None) -> dict:
    sys.path.insert(0, str(TOOLS))
    from expected_figures import venv_for
    with tempfile.TemporaryDirectory() as tmp:
        env = {"PATH": "/usr/bin:/bin", "TMPDIR": tmp, "CACHEDB": f"{tmp}/cache.db", "HOME": tmp}
        cmd = [venv_for(release), str(Path(__file__).resolve()), "--child", str(profile), str(rewrites or "-")]
        proc = subprocess.run(cmd, env=env, cwd=tmp, capture_output=True, text=True, timeout=1800, check=False)
    if proc.returncode:
        return {"error": (proc.stderr.strip().splitlines() or ["no output"])[-1][-300:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    sys.path.insert(0, str(TOOLS))
    from expected_figures import releases_for
    results = {}
    for key, (profile, rewrites) in fixtures().items():
        errors = {}
        for release in releases_for(key):
            r = run(release, profile, rewrites)
            if "error" not in r:
                results[key] = {"tinygrad": release, **r}
                break
            errors[release] = r["error"]
        else:
            results[key] = {"tinygrad": None, "reason": errors}
        r = results[key]
        n = sum(map(len, r.get("tracks", {}).values()))
        print(f"{key:45} {r['tinygrad'] or '-':8} {n} device events on {len(r.get('tracks', {}))} tracks, "
              f"{len(r.get('markers', []))} markers")
    OUT.write_text(json.dumps(results, sort_keys=True, indent=1) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)} ({len(results)} profiles)")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        print(json.dumps(child(sys.argv[2], sys.argv[3])))
    else:
        main()
