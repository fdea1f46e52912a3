"""What the package needs from Python versions newer than its oldest supported one (3.10).

``StrEnum``: ``enum.StrEnum`` on 3.11+; on 3.10 a ``str`` Enum whose ``str()`` and ``format()`` are
its value, as 3.11's. Members compare equal to their strings and are written as them in JSON, CSV
files and MLflow, so typed names replace bare strings without changing any recorded value.
"""

from __future__ import annotations

import enum

if hasattr(enum, "StrEnum"):
    StrEnum = enum.StrEnum
else:  # pragma: no cover - Python 3.10
    class StrEnum(str, enum.Enum):
        def __str__(self) -> str:
            return str(self.value)

        def __format__(self, spec: str) -> str:
            return format(str(self.value), spec)

__all__ = ["StrEnum"]
