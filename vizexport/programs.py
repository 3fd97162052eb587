"""Which codegen context made a launched program: by the program's key (0.14+) or, for launches without one, by its
name — a later context wins, as in tinygrad's viewers. The timeline's reader (a launch's category: a tensor-core
program's UOps) and the site's kernel pages share it."""
from __future__ import annotations

from collections.abc import Sequence

from .records import Context


class ProgramIndex:
    def __init__(self, contexts: Sequence[Context]) -> None:
        self.contexts = contexts
        self.by_key: dict[str | bytes, int] = {}
        for i, c in enumerate(contexts):
            self.by_key.update(dict.fromkeys(c.key.keys, i))
        self.by_name = {c.key.name: i for i, c in enumerate(contexts) if c.source is not None}

    def find(self, key: bytes | None, name: str) -> int | None:
        """Index of the context of a launch of `name` (key: its program's, where the profile has one)."""
        if key:
            return self.by_key.get(key)
        hit = self.by_key.get(name)
        return hit if hit is not None else self.by_name.get(name)

    def uops(self, key: bytes | None, name: str) -> list[str] | None:
        """The final UOp list of that context's program (what a launch's category needs to see tensor cores)."""
        found = self.find(key, name)
        return self.contexts[found].program if found is not None else None

