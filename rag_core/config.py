"""One frozen config, ``RagConfig``, holds every setting; YAML files, CLI flags and notebook parameters set them.

The settings are not listed here: each is declared once (``rag_core.components.Setting``: name, type,
default, range or choices, help) beside the component that reads it: the chunkers'
(``rag_core.ingest.chunkers``), the retrievers' (``rag_core.retrieve.retrievers``), fusion, query
expansion, re-ranking, embedding and vector stores (``rag_core.retrieve.*``), and plugins'.
``rag_core.catalog`` imports every built-in registry by name, so its ``SETTINGS`` holds theirs; this
module declares the pipeline's own (ingest extras, routing, generation, evaluation) and builds
``RagConfig`` from that one table, so a built-in and a plugin setting are read, checked, shown in
``--help`` and logged by the same code. The built-in settings are also typed attributes
(``ConfigFields``, ``rag_core.components.config_fields``) for type checkers and editors.

Precedence, lowest first: defaults, the YAML file, environment variables (a setting's ``env``:
models, LLM provider, LLM timeout and retries), explicit overrides (CLI flags, notebook parameters).
``plugins`` (module names, or ``.py`` files relative to the file that lists them) are imported before
the other settings are checked. Unknown keys are an error naming the key and the nearest valid one;
every numeric setting is checked against its range (NaN and infinity included) before anything runs.
Where the store lives is not a setting: it changes where results are kept, never what they are.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ItemsView, Iterator, Mapping

import yaml

from rag_core.catalog import SETTINGS  # the table, every built-in registry's settings declared in it
from rag_core.components import ConfigError, Rule, Setting, did_you_mean, load_entry_points, load_plugins
from rag_core.components.config_fields import ConfigFields
from rag_core.components.plugins import resolve_plugins
from rag_core.ingest.metadata import check_pattern
from rag_core.jsonl import not_utf8
from rag_core.llm.client import DEFAULT_LLM_MODEL
from rag_core.retrieve.embedding import DEFAULT_EMBED_MODEL
from rag_core.retrieve.rerank import DEFAULT_RERANK_MODEL

__all__ = ["DEFAULT_EMBED_MODEL", "DEFAULT_LLM_MODEL", "DEFAULT_RERANK_MODEL", "ENV_OVERRIDES", "SETTING_HELP",
           "ConfigError", "RagConfig", "load_config", "read_yaml_mapping", "read_yaml_settings", "setting_names"]

LLM_PROVIDERS = ("anthropic", "openai")
CHUNK_CONTEXTS = ("none", "title", "title_heading", "title_section_path")  # rag_core.retrieve.context
MAX_YAML_VALUES = 100_000  # a config or sweep file holding more (aliases written out) is refused
PAGE_SCORES = ("first", "max", "sum", "mean_top")  # first: pages in order of first occurrence; the others pool
PAGE_CREDITS = ("tied", "majority", "page_order")  # rag_core.evaluate.page_credit's rules (a test keeps them equal)
ROUTE_WHEN = ("named", "always")  # route_when: only questions naming a document, or every question


def _pattern_problem(pattern: str) -> str | None:
    return check_pattern(pattern) if pattern else None


def _child_size_fits(values: Mapping[str, Any]) -> tuple[str, str] | None:
    if values["child_size"] and not 0 < values["child_size"] < values["chunk_size"]:
        return "child_size", "child_size must be 0 (off) or > 0 and < chunk_size"
    return None


def _plugins(value: Any) -> tuple[str, ...]:
    entries = [item.strip() for item in value.split(",")] if isinstance(value, str) else [str(item) for item in value]
    return resolve_plugins([entry for entry in entries if entry], None)


SETTINGS.declare(
    Setting("plugins", tuple[str, ...], (), "modules or .py files (relative to the file that lists them) that register "
            "components, imported before the settings are checked", parse=_plugins, group="plugins", stage="chunking"),
    # extraction, context and metadata (rag_core.ingest.pdf_extract, rag_core.retrieve.context, rag_core.ingest.metadata)
    Setting("extract_tables", bool, False, "write PDF tables as Markdown rows with their header cells (PyMuPDF "
            "find_tables; slow, cached)", group="ingest", stage="ingest"),
    Setting("table_text", bool, False, "index each PDF table row as a line with its caption, row label and column "
            "headers, after the text of the chunk it is in (shown text unchanged; find_tables: slow, cached)",
            group="ingest", stage="ingest"),
    Setting("chunk_context", str, "none", "prefix the indexed text of each chunk: none | title | title_heading | "
            "title_section_path "
            "(shown text unchanged)", choices=CHUNK_CONTEXTS, group="ingest", stage="ingest"),
    Setting("metadata_pattern", str, "", "regex with named groups over document ids giving metadata, e.g. "
            "(?P<company>[^_]+)_(?P<year>\\d{4})", rule=_pattern_problem, group="ingest", stage="ingest"),
    Setting("child_size", int, 0, "parent-child: words per searched child chunk (0 = off); the chunk_size parent is "
            "returned", minimum=0, group="chunking", stage="ingest",
            brings=lambda size: ("chunk_unit",) if size else ()),  # children are counted in chunk_unit
    # document routing (rag_core.retrieve.routing)
    Setting("route_docs", int, 0, "first rank documents, then retrieve only within the best N (0 = off)", minimum=0,
            group="routing", stage="candidates", brings=lambda docs: ("tokenizer",) if docs else ()),  # cards' words
    Setting("route_when", str, "named", "named: route only questions that share a word with some document's name "
            "(title, metadata); others search every document | always", choices=ROUTE_WHEN, group="routing",
            stage="candidates"),
    # retrieval
    Setting("k", int, 5, "passages returned (and given to the LLM)", above=0, group="retrieval", stage="answer"),
    Setting("retrieve_depth", int, 20, "candidates taken from each retriever", above=0, group="retrieval",
            stage="candidates"),
    # generation (rag_core.generate)
    Setting("llm_provider", str, "anthropic", "anthropic | openai (env LLM_PROVIDER)", choices=LLM_PROVIDERS,
            env="LLM_PROVIDER", group="generation", stage="answer"),
    Setting("llm_model", str, DEFAULT_LLM_MODEL, "LLM model name (env RAG_LLM_MODEL)", env="RAG_LLM_MODEL",
            group="generation", stage="answer"),
    Setting("max_answer_tokens", int, 1024, "maximum tokens in a generated answer", above=0, group="generation",
            stage="answer"),
    Setting("llm_timeout_s", float, 20.0, "seconds to wait for one LLM request (env RAG_LLM_TIMEOUT_S)", above=0,
            env="RAG_LLM_TIMEOUT_S", group="generation", stage="answer"),
    Setting("llm_max_retries", int, 2, "retries of a timed-out, rate-limited or failed LLM request (env "
            "RAG_LLM_MAX_RETRIES)", minimum=0, env="RAG_LLM_MAX_RETRIES", group="generation", stage="answer"),
    Setting("min_retriever_agreement", int, 2, "without re-ranking: retrievers that must find a passage for an answer",
            minimum=0, group="generation", stage="answer"),
    # evaluation
    Setting("metrics_k", tuple[int, ...], (5, 10), "K values for Recall@K / nDCG@K / hit rate, comma-separated",
            above=0, rule=lambda ks: None if ks else "must hold positive integers", group="evaluation",
            stage="evaluation"),
    Setting("page_score", str, "first", "how page metrics rank pages: first (the pages of the top chunks in order of "
            "first occurrence) | max | sum | mean_top (mean of the best page_top_m) of the scores of the chunks "
            "ranked on each page, over the whole final ranking", choices=PAGE_SCORES, group="evaluation",
            stage="evaluation"),
    Setting("page_top_m", int, 2, "page_score mean_top: how many of a page's best chunk scores are averaged", above=0,
            group="evaluation", stage="evaluation"),
    Setting("page_credit", str, "tied", "how page metrics credit the pages of a passage that crosses pages: tied (they "
            "share its rank; metrics are expected values over their orders) | majority (the page holding most of its "
            "text first) | page_order (in page order, the rule before this setting)", choices=PAGE_CREDITS,
            group="evaluation", stage="evaluation"),
    Setting("context_budgets", tuple[int, ...], (256, 512, 1024, 2048), "budgets in words for the evidence metrics "
            "(evidence/recall@B, precision@B, iou@B: the evidence in the ranking's first B words), comma-separated",
            above=0, rule=lambda budgets: None if budgets else "must hold positive integers", group="evaluation",
            stage="evaluation"),
    Setting("answers", bool, False, "also answer every query (the LLM with a key, else extractively) and score the "
            "answers with the metrics that need no LLM: answer/token_f1, citation/recall, ... (eval --answers)",
            group="evaluation", stage="evaluation"),
    Setting("tracing", bool, True, "log each evaluated query as an MLflow trace with a span per stage (--no-tracing: "
            "off)", group="evaluation", stage="evaluation"),
    Setting("trace_queries", bool, False, "log every 'query' as an MLflow trace to label (query --trace; experiment "
            "--experiment, default 'queries')", group="evaluation", stage="evaluation"),
    owner="general")
SETTINGS.add_rule(Rule(_child_size_fits, "general"))


class RagConfig(ConfigFields):
    """Every declared setting's value (``config.chunk_size``), checked when made; immutable. The built-in
    settings are typed attributes (``ConfigFields``); a plugin's are read the same way, typed ``Any``.

    ``RagConfig(**settings)`` and ``RagConfig.from_dict(values, where=...)`` take values as YAML, CLI
    flags or notebooks give them (``"0.7,0.3"`` for a list, ``"true"`` for a bool) and leave every
    other setting at its default. ``plugins`` are imported first, so their settings can be given too.
    """

    __slots__ = ("_values",)

    def __init__(self, **settings: Any) -> None:
        object.__setattr__(self, "_values", _checked(settings, "config"))

    @classmethod
    def from_dict(cls, values: Mapping[str, Any], *, where: str = "config") -> "RagConfig":
        config = cls.__new__(cls)
        object.__setattr__(config, "_values", _checked(values, where))
        return config

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        values = object.__getattribute__(self, "_values")
        if name in values:
            return values[name]
        if name in SETTINGS:  # declared by a plugin loaded after this config was made: its default
            return SETTINGS[name].default
        raise AttributeError(f"RagConfig has no setting {name!r}{did_you_mean(name, SETTINGS.names())}")

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"RagConfig is immutable: use config.replace({name}=...)")

    def __dir__(self) -> list[str]:
        return sorted({*object.__dir__(self), *SETTINGS.names()})

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RagConfig) and self.as_dict() == other.as_dict()

    def __hash__(self) -> int:
        return hash(tuple(sorted(self.as_dict().items())))

    def __repr__(self) -> str:
        return f"RagConfig({', '.join(f'{key}={value!r}' for key, value in self.as_dict().items())})"

    def __reduce__(self) -> tuple:
        return _restore, (self.as_dict(),)

    def replace(self, **changes: Any) -> "RagConfig":
        return RagConfig.from_dict({**self.as_dict(), **changes})

    def as_dict(self) -> dict[str, Any]:
        """Every setting, in the settings table's order."""
        values = object.__getattribute__(self, "_values")
        return {setting.name: values.get(setting.name, setting.default) for setting in SETTINGS}

    def as_params(self) -> dict[str, str]:
        """Flat string params for MLflow (lists joined with commas)."""
        return {
            key: ",".join(map(str, value)) if isinstance(value, tuple) else str(value)
            for key, value in self.as_dict().items()
        }


def _checked(values: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Every setting's value: `values` (plugins imported first) coerced, the rest defaults; all checked.
    The plugins were loaded by the entry point (CLI, notebook, sweep file) unless this config is made
    directly in Python: ``load_plugins`` imports only those not loaded yet."""
    load_entry_points()
    if values.get("plugins"):
        load_plugins(SETTINGS["plugins"].coerce(values["plugins"], where))
    unknown = [key for key in values if key not in SETTINGS]
    if unknown:
        raise ConfigError(SETTINGS.unknown_message(unknown[0], where))
    checked = {setting.name: setting.coerce(values[setting.name], where) if setting.name in values else setting.default
               for setting in SETTINGS}
    for setting, message in SETTINGS.problems(checked):  # each message starts with the setting's name
        raise ConfigError(f"{message}, got {checked[setting]!r}")
    return checked


def _restore(values: dict[str, Any]) -> RagConfig:
    """A pickled config, in a process of its own (a worker): its plugins are loaded there once."""
    if values.get("plugins"):
        load_plugins(values["plugins"])
    config = RagConfig.__new__(RagConfig)
    object.__setattr__(config, "_values", dict(values))
    return config


class _SettingHelp(Mapping[str, str]):
    """setting -> its one line of help, for ``--help`` (plugins' settings included once loaded)."""

    def __getitem__(self, name: str) -> str:
        return SETTINGS[name].help

    def __iter__(self) -> Iterator[str]:
        return iter(SETTINGS.names())

    def __len__(self) -> int:
        return len(SETTINGS.names())


SETTING_HELP: Mapping[str, str] = _SettingHelp()


class _EnvOverrides(Mapping[str, str]):
    """setting -> the environment variable that overrides its default."""

    def _table(self) -> dict[str, str]:
        return {setting.name: setting.env for setting in SETTINGS if setting.env}

    def __getitem__(self, name: str) -> str:
        return self._table()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())

    def items(self) -> ItemsView[str, str]:  # one table, not one per key (load_config runs once per sweep point)
        return self._table().items()


ENV_OVERRIDES: Mapping[str, str] = _EnvOverrides()


def setting_names() -> list[str]:
    load_entry_points()
    return SETTINGS.names()


def load_config(path: str | Path | None = None, overrides: Mapping[str, Any] | None = None) -> RagConfig:
    """Defaults < YAML file < environment (a setting's ``env``) < overrides (None values are left out)."""
    values: dict[str, Any] = {}
    if path is not None:
        values.update(read_yaml_settings(path))
    for key, env_name in ENV_OVERRIDES.items():
        if os.environ.get(env_name):
            values[key] = os.environ[env_name]
    given = {key: value for key, value in (overrides or {}).items() if value is not None}
    if values.get("plugins") and given.get("plugins"):  # plugins add up: the file's, then the overrides'
        given["plugins"] = [*values["plugins"], *SETTINGS["plugins"].coerce(given["plugins"], "settings")]
    values.update(given)
    return RagConfig.from_dict(values, where=str(path) if path else "settings")


def read_yaml_mapping(path: str | Path, expected: str = "setting: value") -> dict[str, Any]:
    """A YAML file that must hold a mapping; errors name the file."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"file not found: {path}")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8-sig")) or {}
    except UnicodeDecodeError as exc:
        raise ConfigError(not_utf8(path, exc)) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{path} is nested too deeply to read") from None
    if _expanded_size(data) > MAX_YAML_VALUES:
        raise ConfigError(f"{path} expands to more than {MAX_YAML_VALUES:,} values (YAML aliases repeating "
                          "aliases?); write the values out")
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a mapping of {expected}")
    return data


def _expanded_size(data: Any) -> int:
    """How many values `data` holds with every YAML alias written out, counting string characters by
    the thousand; stops counting past ``MAX_YAML_VALUES`` (an alias bomb shares its lists, so it is
    small in memory until something walks or prints it)."""
    count, stack = 0, [data]
    while stack and count <= MAX_YAML_VALUES:
        value = stack.pop()
        count += 1 + (len(value) // 1000 if isinstance(value, str) else 0)
        if isinstance(value, dict):
            stack += [*value.keys(), *value.values()]
        elif isinstance(value, (list, tuple)):
            stack += value
    return count


def read_yaml_settings(path: str | Path) -> dict[str, Any]:
    """The settings of a YAML config file, checked (unknown keys and bad values named with the file);
    its ``plugins`` files made absolute against the file's folder."""
    data = read_yaml_mapping(path)
    if "plugins" in data:
        data["plugins"] = list(file_plugins(data["plugins"], path))
    RagConfig.from_dict(data, where=str(path))
    return data


def file_plugins(entries: Any, path: str | Path) -> tuple[str, ...]:
    """A file's ``plugins`` value (a list, or names separated by commas), its ``.py`` files made
    absolute against the folder of `path`, the file that lists them."""
    items = entries if isinstance(entries, (list, tuple)) else str(entries or "").split(",")
    return resolve_plugins([str(item).strip() for item in items if str(item).strip()], Path(path).resolve().parent)
