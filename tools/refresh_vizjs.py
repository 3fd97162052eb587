"""Refresh the site's vendored Graphviz for the browser: `@viz-js/viz` (Graphviz compiled to WebAssembly, inlined
in one classic script) from the npm registry, pinned by version and checksum, with the licences it must ship.

    python tools/refresh_vizjs.py             # fetch the pinned version, check it, write vizexport/site/vendor/
    python tools/refresh_vizjs.py --check     # only check that the committed files match the pinned version

Writes vizexport/site/vendor/: viz-global.js.gz (dist/viz-global.js, gzip'd: the site inlines it as base64),
LICENSES.txt (viz.js: MIT; Graphviz: EPL-1.0, with where its source is; Expat: MIT) and VERSION.
Needs npm (to download) and Debian's graphviz and libexpat1 packages (their licence texts).
"""
import argparse
import gzip
import hashlib
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

VERSION = "3.31.0"
OUT = Path(__file__).resolve().parent.parent / "vizexport" / "site" / "vendor"
DEBIAN_GRAPHVIZ = Path("/usr/share/doc/graphviz/copyright")
DEBIAN_EXPAT = Path("/usr/share/doc/libexpat1/copyright")
MIT = """Permission is hereby granted, free of charge, to any person obtaining a copy of this software and associated
documentation files (the "Software"), to deal in the Software without restriction, including without limitation the
rights to use, copy, modify, merge, publish, distribute, sublicense, and/or sell copies of the Software, and to permit
persons to whom the Software is furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all copies or substantial portions of the
Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED, INCLUDING BUT NOT LIMITED TO THE
WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE AUTHORS OR
COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR
OTHERWISE, ARISING FROM, OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE SOFTWARE.
"""


def fetch(tmp: Path) -> tuple[bytes, dict]:
    """dist/viz-global.js and lib/provenance.json of the pinned version, from the npm registry."""
    subprocess.run(["npm", "pack", f"@viz-js/viz@{VERSION}", "--silent"], cwd=tmp, check=True, capture_output=True)
    (tarball,) = tmp.glob("viz-js-viz-*.tgz")
    with tarfile.open(tarball) as t:
        js = t.extractfile("package/dist/viz-global.js").read()
        provenance = json.load(t.extractfile("package/lib/provenance.json"))
    return js, provenance


def epl_text() -> str:
    """The EPL-1.0 text, as Debian's graphviz package states it."""
    lines = DEBIAN_GRAPHVIZ.read_text().splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.strip() == "Eclipse Public License - v 1.0")
    body = []
    for ln in lines[start:]:
        if body and ln and not ln.startswith(" "):  # the next field of the copyright file
            break
        body.append(ln[1:] if ln.startswith(" ") else ln)
    return "\n".join("" if ln == "." else ln for ln in body).strip() + "\n"


def expat_copyright() -> str:
    text = DEBIAN_EXPAT.read_text()
    holders = [ln.strip().removeprefix("Copyright:").strip() for ln in text.splitlines()
               if "Copyright (" in ln and "debian" not in ln.lower()]
    return "\n".join(dict.fromkeys(holders))


def licenses(provenance: dict) -> str:
    deps = [d["uri"] for d in provenance["predicate"]["buildDefinition"]["resolvedDependencies"]]
    graphviz = next(u for u in deps if "graphviz" in u)
    expat = next(u for u in deps if "expat" in u)
    return (f"vizexport ships viz-global.js of @viz-js/viz {VERSION} (https://github.com/mdaines/viz-js), which "
            f"contains object code of Graphviz and Expat.\n\n"
            f"=== Viz.js {VERSION}: MIT ===\nCopyright (c) Michael Daines\n\n{MIT}\n"
            f"=== Graphviz: Eclipse Public License 1.0 ===\nThe Graphviz source code of this build: {graphviz}\n\n"
            f"{epl_text()}\n=== Expat: MIT ===\nSource: {expat}\n{expat_copyright()}\n\n{MIT}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        js, provenance = fetch(Path(tmp))
    digest = hashlib.sha256(js).hexdigest()
    version = f"@viz-js/viz {VERSION}\ndist/viz-global.js sha256 {digest}\n"
    if args.check:
        ok = (OUT / "VERSION").read_text() == version and gzip.decompress((OUT / "viz-global.js.gz").read_bytes()) == js
        print("vendor: " + ("matches" if ok else "DIFFERS from") + f" @viz-js/viz {VERSION}")
        return 0 if ok else 1
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "viz-global.js.gz").write_bytes(gzip.compress(js, 9, mtime=0))
    (OUT / "LICENSES.txt").write_text(licenses(provenance))
    (OUT / "VERSION").write_text(version)
    print(f"wrote {OUT}: viz-global.js {len(js):,} bytes (sha256 {digest[:12]}…)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
