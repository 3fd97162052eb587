"""Lazy package faces (PEP 562): a public name's module is imported when the name is first used, so that importing a
package (`vizexport`, `vizexport.graphs`) loads no reader, writer or heavy dependency. A leaf module."""
from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def attributes(package: str, namespace: dict[str, Any], home: dict[str, str]) -> Callable[[str], Any]:
    """A package's module-level `__getattr__`: `home` maps each lazy name to its module (relative to `package`);
    a name, once imported, is kept in the package's `namespace` (later look-ups skip this function)."""
    def __getattr__(name: str) -> Any:
        module = home.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = namespace[name] = getattr(importlib.import_module(module, package), name)
        return value
    return __getattr__
