"""`python -m vizexport` and the `vizexport` command: on a terminal, a first status line before the command's
modules load (they take a second or more on a busy machine), then the command (cli.run)."""
from __future__ import annotations

from .progress import starting


def main() -> None:
    starting()
    from .cli import run  # after the first line: this import is the slow part
    run()


if __name__ == "__main__":
    main()
