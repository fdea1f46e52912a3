"""Package exports that are imported on first use (PEP 562), so that ``import rag_core.retrieve.bm25``
does not also import every sibling module, and a command imports only what it uses."""

from __future__ import annotations

import importlib
from typing import Any, Callable, Mapping


def lazy_exports(package: str, exports: Mapping[str, str]) -> tuple[Callable[[str], Any], list[str]]:
    """(``__getattr__``, ``__all__``) for `package`, whose public name -> submodule is `exports`."""

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{exports[name]}"), name)

    return __getattr__, sorted(exports)
