"""The workbench is split by concern: no module sits loose in ``rag_core/workbench``, every subpackage
declares ``__all__``, and every name it exports resolves (a renamed function breaks this test, not a user)."""

import importlib
from pathlib import Path

import pytest

import rag_core.workbench

WORKBENCH = Path(rag_core.workbench.__file__).parent
SUBPACKAGES = sorted(path.name for path in WORKBENCH.iterdir() if (path / "__init__.py").is_file())


def test_no_module_sits_loose_in_the_workbench():
    loose = sorted(path.name for path in WORKBENCH.glob("*.py") if path.name != "__init__.py")
    assert loose == []
    assert SUBPACKAGES == ["execution", "plans", "reports", "search", "statistics", "tracking"]


@pytest.mark.parametrize("name", ["", *SUBPACKAGES])
def test_every_exported_name_resolves(name):
    package = importlib.import_module(f"rag_core.workbench{'.' + name if name else ''}")
    assert package.__all__, f"rag_core.workbench.{name} exports nothing"
    for export in package.__all__:
        assert getattr(package, export) is not None, f"{name}.{export}"
    with pytest.raises(AttributeError):
        package.no_such_name  # noqa: B018 - the lazy __getattr__ must not invent names
