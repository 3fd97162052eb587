"""The docs cannot rot unnoticed: the README's relative links and images point at files that exist, it stays short,
its test command is the one CI runs, and every command and docs page is in the MkDocs navigation (CI also builds
the site with `mkdocs build --strict`, which checks every link and anchor between the pages)."""
from __future__ import annotations

import re

from .conftest import ROOT, run_cli

README = ROOT / "README.md"
DOCS = ROOT / "docs"
MAX_README_LINES = 150
# [text](target) and ![alt](target): the target up to a blank or the closing parenthesis (alt text may span lines)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
NAV_PAGE = re.compile(r"^\s*-\s*[^:]+:\s*(\S+\.md)\s*$", re.MULTILINE)
SUBCOMMANDS = re.compile(r"\{([a-z,]+)\}")


def relative_links(text: str) -> list[str]:
    """Link targets that are paths in the repository (no scheme, no mail, no bare anchor), without their anchor."""
    targets = (m.group(1) for m in LINK.finditer(text))
    return [t.split("#", 1)[0] for t in targets if not re.match(r"[a-z]+:", t) and not t.startswith("#")]


def test_readme_links_point_at_files():
    links = relative_links(README.read_text())
    assert "docs/screenshot.png" in links and "docs/usage.md" in links
    missing = [t for t in links if not (ROOT / t).is_file()]
    assert not missing, f"README.md links to files that do not exist: {missing}"


def test_the_link_check_finds_a_broken_link():
    text = "see [usage](docs/usage.md#common-flags), ![shot](docs/nope.png), [web](https://x.org/a.md), [top](#top)"
    assert relative_links(text) == ["docs/usage.md", "docs/nope.png"]
    assert not (ROOT / "docs/nope.png").exists()


def test_readme_is_short_and_runs_what_ci_runs():
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_README_LINES
    ci = (ROOT / ".ci" / "run").read_text()
    setup = [line.strip() for line in lines if line.startswith("    pip install") and "&&" in line]
    assert setup[:2] == ['pip install . && vizexport demo -o out/', 'pip install -e ".[test]" && python -m pytest -q']
    assert setup[1] in ci


def test_every_command_and_page_is_in_the_navigation():
    nav = NAV_PAGE.findall((ROOT / "mkdocs.yml").read_text())
    pages = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    assert sorted(nav) == pages
    helped = run_cli("--help")
    commands = SUBCOMMANDS.search(helped.stdout).group(1).split(",")
    assert {"convert", "top", "diff", "history", "demo"} <= set(commands)
    for name in commands:
        assert f"commands/{name}.md" in nav or f"{name}.md" in nav, f"no docs page for `vizexport {name}`"
