"""Which codegen context made a launched program: by the program's key (0.14+) or, for launches without one, by its
name — a later context wins, as in tinygrad's viewers. The site's kernel pages, and the categories of `top`, the
report and the diff share it."""
from __future__ import annotations

from collections.abc import Sequence

from ..records import Context, RewriteLog


class ProgramIndex:
    def __init__(self, contexts: Sequence[Context]) -> None:
        self.contexts = contexts
        self.by_key: dict[str | bytes, int] = {}
        for i, c in enumerate(contexts):
            self.by_key.update(dict.fromkeys(c.key.keys, i))
        self.by_name = {c.key.name: i for i, c in enumerate(contexts) if c.source is not None}

    def find(self, program: str | None, name: str) -> int | None:
        """Index of the context of a launch of `name` (program: its key in hex, where the profile has one)."""
        if program:
            try:
                return self.by_key.get(bytes.fromhex(program))
            except ValueError:  # not a key the reader wrote: no context
                return None
        hit = self.by_key.get(name)
        return hit if hit is not None else self.by_name.get(name)

    def uops(self, program: str | None, name: str) -> list[str] | None:
        """The final UOp list of that context's program (what analysis.category needs to see tensor cores)."""
        found = self.find(program, name)
        return self.contexts[found].program if found is not None else None


def program_index(log: RewriteLog | None) -> ProgramIndex | None:
    """The index of a rewrites trace's contexts, if there is one."""
    return ProgramIndex(log.contexts) if log is not None else None
