"""Setting declarations: every setting of the workbench, built-in or declared by a plugin, is one
``Setting`` (name, type, default, range or choices, help) in one table, ``SETTINGS``.

``rag_core.config.RagConfig`` is built from this table, and so are the CLI flags, ``--help``,
``SETTING_HELP``, the notebooks' defaults, the sweep's checks and the MLflow params: a setting is
declared once, beside the component that reads it (``Registry.register(..., settings=[...])``), or
in ``rag_core.config`` for the pipeline's own settings. A built-in and a plugin setting go through
the same code.

Each setting names the STAGE whose results it changes (``STAGES``, earliest first: chunking, ingest,
index, candidates, rerank, answer, evaluation); a change invalidates the results of its stage and of
every later one. Every reuse key (the sweep's groupings, the cost estimate's dense indexes, the
candidates cache, the store's names) is derived from this column by ``rag_core.components.stages``; a
setting that does not say is taken to change the chunks (``chunking``, the earliest stage: it can only
make reuse rarer, never stale).

Checks that involve several settings (``overlap < chunk_size``) are ``Rule`` functions added to the
table; they too can come from a component.
Left out: settings nested in mappings (a setting is one plain value or a flat list of them).
"""

from __future__ import annotations

import difflib
import math
import reprlib
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator, Mapping, Sequence

from rag_core.errors import ConfigError  # the floor's: bad input, exit 2

# The order settings are listed in (--help, the components command, MLflow), by group; unknown groups last.
GROUPS = ("plugins", "chunking", "ingest", "routing", "retrieval", "fusion", "expansion", "rerank", "bm25",
          "embedding", "vector_store", "generation", "evaluation")

TYPES = {int: "int", float: "float", bool: "bool", str: "str",
         tuple[int, ...]: "list of int", tuple[float, ...]: "list of float", tuple[str, ...]: "list of str"}
ITEM_TYPE = {tuple[int, ...]: int, tuple[float, ...]: float, tuple[str, ...]: str}
_SHORT = reprlib.Repr()  # a bad value in a message: cut short, however big or deep it is
_SHORT.maxstring, _SHORT.maxother, _SHORT.maxlevel, _SHORT.maxlist = 80, 80, 2, 4
LOADING: list[str] = []  # origins of the plugins being imported now, innermost last (registry.loading)


Choices = Sequence[str] | Callable[[], Sequence[str]]

# What a setting's change invalidates, earliest first: the chunks; the text indexed with them (tables,
# contexts, metadata, children); the retrievers' indexes; the candidate lists (search, fusion, expansion,
# routing); the re-ranked order; the answer (k passages, the LLM); the metrics only (or nothing: tracing).
STAGES = ("chunking", "ingest", "index", "candidates", "rerank", "answer", "evaluation")
DEFAULT_STAGE = STAGES[0]  # a plugin's setting that does not say: invalidates everything (never stale)


@dataclass(frozen=True)
class Setting:
    """One setting. ``choices`` are the valid values (a registry's ``names`` method: the names
    registered when the value is checked); ``minimum``/``maximum`` are inclusive bounds and ``above``
    an exclusive lower bound, applied to each item of a list; ``rule`` returns what is wrong with a
    value (``"must be ..."``) or None; ``parse`` turns a YAML or CLI value into the setting's type
    when plain conversion is not enough; ``env`` names an environment variable that overrides the
    default (``load_config``)."""

    name: str
    type: Any  # int | float | bool | str | tuple[int, ...] | tuple[float, ...] | tuple[str, ...]
    default: Any
    help: str
    choices: Choices | None = None
    minimum: float | None = None
    maximum: float | None = None
    above: float | None = None
    rule: Callable[[Any], str | None] | None = None
    parse: Callable[[Any], Any] | None = None
    env: str | None = None
    group: str = ""
    owner: str = ""  # set when declared: "general" or "<kind> <name>" (the component that declares it)
    stage: str = DEFAULT_STAGE  # the earliest stage (STAGES) whose results it changes
    brings: Callable[[Any], Sequence[str]] | None = None  # settings its value makes part of its stage too
    applies: Callable[[Any], bool] | None = None  # whether it changes anything for a config (None: always)

    def __post_init__(self) -> None:
        if self.stage not in STAGES:
            raise ValueError(f"setting {self.name!r}: stage must be one of {', '.join(STAGES)}, got {self.stage!r}")
        if self.type not in TYPES:
            raise TypeError(f"setting {self.name!r}: type must be one of {', '.join(TYPES.values())}")
        if not self.name.isidentifier() or self.name.startswith("_"):
            raise ValueError(f"setting name {self.name!r} must be a Python identifier without a leading underscore")

    @property
    def type_name(self) -> str:
        return TYPES[self.type]

    @property
    def is_list(self) -> bool:
        return self.type in ITEM_TYPE

    def valid_choices(self) -> list[str]:
        choices = self.choices() if callable(self.choices) else self.choices
        return list(choices or ())

    def coerce(self, value: Any, where: str = "settings") -> Any:
        """`value` (from YAML, a CLI flag or a notebook) as this setting's type; ``ConfigError`` naming
        the setting otherwise."""
        try:
            if self.parse is not None:
                return self.parse(value)
            if self.is_list:
                items = [item for item in value.split(",") if item.strip()] if isinstance(value, str) else list(value)
                return tuple(_plain(ITEM_TYPE[self.type], item) for item in items)
            return _plain(self.type, value)
        except (TypeError, ValueError, OverflowError):  # OverflowError: int(inf)
            raise ConfigError(f"setting {self.name!r} in {where}: cannot use {_short(value)} as {self.type_name}"
                              + (" (true or false)" if self.type is bool else "")) from None

    def problem(self, value: Any) -> str | None:
        """What is wrong with `value` (already coerced), as ``"<name> must ..."``, or None."""
        items = value if self.is_list else (value,)
        if self.type is float or self.type == tuple[float, ...]:
            if not all(math.isfinite(item) for item in items):
                return f"{self.name} must {'hold finite numbers' if self.is_list else 'be a finite number'}"
        bounds = self.describe_range()
        if bounds and not all(self._in_range(item) for item in items):
            return f"{self.name} must {'hold numbers' if self.is_list else 'be'} {bounds}"
        choices = self.valid_choices()
        if choices and value not in choices:
            return f"{self.name} must be one of {', '.join(choices)}{did_you_mean(value, choices)}"
        if self.rule is not None:
            found = self.rule(value)
            if found:
                return f"{self.name} {found}"
        return None

    def describe_range(self) -> str:
        """``> 0``, ``>= 0``, ``between 0 and 1``, or ''."""
        if self.minimum is not None and self.maximum is not None:
            return f"between {self.minimum:g} and {self.maximum:g}"
        if self.above is not None:
            return f"> {self.above:g}"
        if self.minimum is not None:
            return f">= {self.minimum:g}"
        if self.maximum is not None:
            return f"<= {self.maximum:g}"
        return ""

    def _in_range(self, item: float) -> bool:
        return ((self.minimum is None or item >= self.minimum) and (self.maximum is None or item <= self.maximum)
                and (self.above is None or item > self.above))

    def describe(self) -> dict[str, Any]:
        """Plain description (the components command's JSON)."""
        return {"name": self.name, "type": self.type_name, "default": list(self.default) if self.is_list else self.default,
                "range": self.describe_range() or None, "choices": self.valid_choices() or None, "help": self.help,
                "env": self.env, "owner": self.owner, "stage": self.stage}


def _short(value: Any) -> str:
    text = _SHORT.repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def _plain(kind: type, value: Any) -> Any:
    if kind is bool:
        if isinstance(value, str):
            if value.lower() in ("true", "1", "yes", "on"):
                return True
            if value.lower() in ("false", "0", "no", "off"):
                return False
            raise ValueError(value)
        if isinstance(value, bool) or getattr(getattr(value, "dtype", None), "kind", "") == "b":  # numpy's too
            return bool(value)
        raise ValueError(value)  # `per_page: 5` or `per_page: [x]` is a mistake, not true
    if kind is int:
        if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
            raise ValueError(value)
        return int(value)
    if kind is float:
        if isinstance(value, bool):
            raise ValueError(value)
        return float(value)
    if isinstance(value, (dict, list, tuple, set)):
        raise ValueError(value)
    return str(value)


def did_you_mean(value: Any, names: Sequence[str]) -> str:
    """`` (did you mean 'x'?)`` for the name nearest to `value` (difflib), or ''."""
    close = difflib.get_close_matches(str(value), [str(name) for name in names], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


@dataclass(frozen=True)
class Rule:
    """A check over several settings: ``check(values)`` returns (setting, "<setting> must ...") or None."""

    check: Callable[[Mapping[str, Any]], "tuple[str, str] | None"]
    owner: str = "general"


@dataclass
class SettingsTable:
    """Every declared setting, by name, listed by group and then in declaration order."""

    _settings: dict[str, Setting] = field(default_factory=dict)
    _rules: list[Rule] = field(default_factory=list)
    _origins: dict[str, str] = field(default_factory=dict)

    def declare(self, *settings: Setting, owner: str = "general", origin: str | None = None) -> None:
        """Add settings; declaring a name again is an error unless it is the same declaration. `origin`
        (default: the plugin being imported, else ``built-in``) is where they come from."""
        for setting in settings:
            setting = _with_owner(setting, owner)
            known = self._settings.get(setting.name)
            if known is not None and known != setting:
                raise ValueError(f"setting {setting.name!r} is declared twice: by {known.owner} and by {owner}")
            self._settings[setting.name] = setting
            self._origins[setting.name] = origin or (LOADING[-1] if LOADING else "built-in")

    def origin(self, name: str) -> str:
        """``built-in`` (declared by rag_core), or the plugin module or entry point that declared `name`."""
        return self._origins.get(name, "built-in")

    def add_rule(self, rule: Rule) -> None:
        if rule not in self._rules:
            self._rules.append(rule)

    def __iter__(self) -> Iterator[Setting]:
        order = {group: position for position, group in enumerate(GROUPS)}
        # a stable sort keeps declaration order within a group (declared.index(s) as a key was quadratic,
        # with a dataclass comparison per step: 40 s of a 10,000-point sweep's loading)
        return iter(sorted(self._settings.values(), key=lambda s: order.get(s.group, len(GROUPS))))

    def __contains__(self, name: object) -> bool:
        return name in self._settings

    def __getitem__(self, name: str) -> Setting:
        return self._settings[name]

    def get(self, name: str) -> Setting | None:
        return self._settings.get(name)

    def names(self) -> list[str]:
        return [setting.name for setting in self]

    def defaults(self) -> dict[str, Any]:
        return {setting.name: setting.default for setting in self}

    def unknown_message(self, key: str, where: str) -> str:
        return (f"unknown setting {key!r} in {where}{did_you_mean(key, self.names())}; "
                f"valid settings: {', '.join(sorted(self.names()))}")

    def problems(self, values: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
        """(setting, message) for each value out of range, then for each rule broken."""
        for setting in self:
            if setting.name in values:
                message = setting.problem(values[setting.name])
                if message:
                    yield setting.name, message
        for rule in self._rules:
            found = rule.check(values)
            if found:
                yield found


def _with_owner(setting: Setting, owner: str) -> Setting:
    return setting if setting.owner else replace(setting, owner=owner, group=setting.group or owner.split()[0])


SETTINGS = SettingsTable()  # every setting declared so far (the built-ins when rag_core.config is imported)
