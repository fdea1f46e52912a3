"""Plugins are loaded once per entry point: the CLI (before parsing), a notebook's parameters
(``config_from_parameters``) and a sweep file (``load_sweep``), each also making configs that name
the plugins. Counted twice over: the plugin file counts its own executions (a line appended to a file
beside it, at module level), and the importer (``_import_file``) counts its calls."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from rag_core.cli import main as cli_main
from rag_core.components import load_plugins, loaded_plugins, plugins
from rag_core.config import RagConfig, load_config

PLUGIN = '''
from pathlib import Path

from rag_core.components import Setting
from rag_core.records import ScoredId
from rag_core.retrieve.retrievers import RETRIEVERS, Ranked, Retriever

with open(Path(__file__).with_name("loads.txt"), "a", encoding="utf-8") as counter:
    counter.write("loaded\\n")


@RETRIEVERS.register("{name}", help="first chunks first", settings=[Setting("{name}_skip", int, 0, "skipped", minimum=0)])
class FirstChunks(Retriever):
    def build(self, chunks):
        self.ids = list(chunks.ids)

    def search(self, query, depth, allowed_doc_ids=None):
        return Ranked([ScoredId(i, 1.0) for i in self.ids[self.config.{name}_skip:][:depth]])
'''


@dataclass
class Counted:
    path: Path  # the plugin file
    calls: list[Path] = field(default_factory=list)  # the importer's

    def counts(self) -> tuple[int, int]:
        """(the plugin's executions, the importer's calls) so far."""
        loads = self.path.with_name("loads.txt")
        return (len(loads.read_text(encoding="utf-8").splitlines()) if loads.exists() else 0), len(self.calls)


@pytest.fixture
def plugin(tmp_path, isolated_components, monkeypatch) -> Counted:
    """A plugin file registering the retriever ``counted`` (setting ``counted_skip``), counted."""
    counted = Counted(tmp_path / "counted.py")
    counted.path.write_text(PLUGIN.format(name="counted"), encoding="utf-8")
    importer = plugins._import_file
    monkeypatch.setattr(plugins, "_import_file", lambda file: counted.calls.append(file) or importer(file))
    return counted


def test_a_second_call_with_the_same_plugins_does_nothing_and_the_load_is_recorded(plugin):
    assert str(plugin.path) not in loaded_plugins()
    load_plugins([str(plugin.path)])
    load_plugins([str(plugin.path)])
    load_plugins(["counted.py"], base_dir=plugin.path.parent)  # the same file, named relative to its folder
    assert plugin.counts() == (1, 1)
    assert str(plugin.path) in loaded_plugins()
    assert RagConfig(plugins=[str(plugin.path)], counted_skip=2).counted_skip == 2  # a config made in Python
    assert plugin.counts() == (1, 1)


def test_the_cli_loads_a_plugin_once_before_parsing(plugin, tmp_path, capsys):
    config_file = tmp_path / "config.yaml"
    config_file.write_text("plugins: [counted.py]\ncounted_skip: 1\n", encoding="utf-8")
    assert cli_main(["components", "--json", "--config", str(config_file), "--plugins", str(plugin.path),
                     "--counted-skip", "3"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert "counted" in [component["name"] for component in listing["kinds"]["retriever"]["components"]]
    assert plugin.counts() == (1, 1)


def test_a_notebooks_parameters_load_a_plugin_once(plugin):
    from rag_core.workbench.execution.evaluation import config_from_parameters

    config = config_from_parameters({"plugins": [str(plugin.path)], "settings": {"mode": "counted", "counted_skip": 2},
                                     "chunk_size": 64, "overlap": 0})
    assert (config.mode, config.counted_skip, config.chunk_size) == ("counted", 2, 64)
    assert config.plugins == (str(plugin.path),)
    assert plugin.counts() == (1, 1)


def _sweep_file(plugin: Counted) -> Path:
    sweep = plugin.path.with_name("sweep.yaml")
    sweep.write_text("input: docs\ngolden: golden.jsonl\nplugins: [counted.py]\n"
                     "base: {mode: counted, rerank_depth: 0}\ngrid: {counted_skip: [0, 1, 2]}\n", encoding="utf-8")
    return sweep


def test_a_sweep_file_loads_a_plugin_once_for_all_its_points(plugin):
    from rag_core.workbench.plans.sweep_file import load_sweep

    spec = load_sweep(_sweep_file(plugin))
    points, skipped = spec.points()
    assert [point.config.counted_skip for point in points] == [0, 1, 2] and not skipped
    assert all(point.config.plugins == (str(plugin.path),) for point in points)
    assert plugin.counts() == (1, 1)
    load_config(None, {"plugins": [str(plugin.path)], "counted_skip": 5})  # a point's config made again
    assert plugin.counts() == (1, 1)


def test_the_sweep_command_loads_a_plugin_once(plugin, monkeypatch):
    from rag_core.cli import sweep

    seen = []
    monkeypatch.setattr(sweep, "dry_run", lambda spec, args: seen.append(len(spec.points()[0])) or 0)
    assert cli_main(["sweep", str(_sweep_file(plugin)), "--dry-run", "--counted-skip", "1"]) == 0
    assert seen == [3]
    assert plugin.counts() == (1, 1)


def test_a_plugin_that_fails_is_not_recorded_and_is_tried_again(tmp_path, isolated_components):
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('not today')\n", encoding="utf-8")
    for _ in range(2):
        with pytest.raises(Exception, match="plugin .*broken.py failed to import: RuntimeError: not today"):
            load_plugins([str(broken)])
    assert str(broken) not in loaded_plugins()
