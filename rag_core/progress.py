"""The one progress helper: a tqdm bar over a list when asked for, the list itself otherwise.

Left out: nested bars (tqdm is imported only when a bar shows).
"""

from __future__ import annotations

from typing import Iterable, TypeVar

Item = TypeVar("Item")


def progress(items: Iterable[Item], enabled: bool, description: str, unit: str = "it",
             total: int | None = None) -> Iterable[Item]:
    """`items`, with a bar when `enabled` (`total`: the length of an iterator that has none)."""
    if not enabled:
        return items
    from tqdm.auto import tqdm

    return tqdm(items, desc=description, unit=unit, total=total)
