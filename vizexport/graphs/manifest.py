"""manifest.json of a rendered rewrites folder, as typed records: every selected context, rewrite and step, with
where its SVG is. The site reads the same records."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from ..output import write_atomic
from ..records import OPTIONAL, to_json

MANIFEST = "manifest.json"


@dataclass
class Location:
    file: str
    line: int

    @classmethod
    def of(cls, loc: tuple[str, int] | None) -> Location | None:
        return None if loc is None else cls(*loc)


@dataclass
class StepEntry:
    index: int
    match: int | None  # index into the rewrite's matches (None: the input graph)
    pattern: Location | None  # the pattern that matched
    seconds: float | None  # time the match took in tinygrad
    changed: int | None  # nodes new in this graph (None: not replayed)
    created: int  # of those, the replacement's own
    nodes: int | None  # nodes in the graph
    svg: str | None = None  # relative to the manifest's folder (None: not drawn)
    error: str | None = field(default=None, metadata=OPTIONAL)
    drawn: int | None = field(default=None, metadata=OPTIONAL)  # boxes drawn (fewer: folded or capped)
    capped: bool | None = field(default=None, metadata=OPTIONAL)  # only the neighbourhood of the change is drawn
    timeout: bool | None = field(default=None, metadata=OPTIONAL)
    render_error: bool | None = field(default=None, metadata=OPTIONAL)
    diff: str | None = field(default=None, metadata=OPTIONAL)  # text diff of the match, relative path


@dataclass
class RewriteEntry:
    index: int
    name: str
    depth: int
    bottom_up: bool
    walk: bool
    enter_calls: bool
    loc: Location | None
    matches: int
    seconds: float
    path: str
    steps: list[StepEntry] = field(default_factory=list)


@dataclass
class ContextEntry:
    index: int
    name: str
    color: str | None
    path: str
    rewrites: list[RewriteEntry] = field(default_factory=list)


@dataclass
class RenderStats:
    unique_graphs: int = 0
    capped: int = 0
    timeouts: int = 0
    render_errors: int = 0
    replay_errors: int = 0

    def add(self, other: RenderStats) -> None:
        for k, v in vars(other).items():
            setattr(self, k, getattr(self, k) + v)


@dataclass
class Summary:
    contexts: int
    rewrites: int
    matches: int
    steps: int
    rendered: int
    unique_graphs: int
    capped: int
    timeouts: int
    render_errors: int
    replay_errors: int
    svg_files: int


@dataclass
class Options:
    ctx: str | None
    rewrite: str | None
    steps: str
    all_steps: bool
    max_nodes: int
    timeout: float
    step_limit: int


@dataclass
class ReleaseEntry:
    release: str
    confidence: str


@dataclass
class Manifest:
    vizexport: str
    source: str
    tinygrad: ReleaseEntry
    options: Options
    layout: str
    summary: Summary
    contexts: list[ContextEntry]


def write_manifest(folder: Path, manifest: Manifest) -> None:
    """folder/manifest.json, compact (a training step's manifest lists tens of thousands of steps)."""
    text = json.dumps(to_json(manifest), ensure_ascii=False, separators=(",", ":"))
    write_atomic(folder / MANIFEST, (text + "\n").encode())


@lru_cache(maxsize=4096)  # a trace names a few hundred files, at every one of its matches
def short_path(path: str) -> str:
    """tinygrad/… for tinygrad's own files (wherever they were installed), else the file name."""
    p = path.replace("\\", "/")
    i = p.rfind("/tinygrad/")
    return p[i + 1:] if i >= 0 else p.rsplit("/", 1)[-1]
