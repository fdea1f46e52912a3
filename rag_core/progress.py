"""The one progress helper: a tqdm bar over a list when asked for, the list itself otherwise.

Left out: nested bars, progress for work that is not a list (tqdm is imported only when a bar shows).
"""

from __future__ import annotations

from typing import Sequence, TypeVar

Item = TypeVar("Item")


def progress(items: Sequence[Item], enabled: bool, description: str, unit: str = "it") -> Sequence[Item]:
    if not enabled:
        return items
    from tqdm.auto import tqdm

    return tqdm(items, desc=description, unit=unit)
