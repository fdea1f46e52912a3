"""One registry class for every kind of component (retrievers, chunkers, fusions, re-rankers, query
expansions, embedding and re-rank backends, vector stores, ...), after lm-evaluation-harness's
``lm_eval/api/registry.py``: a name maps to an implementation, lookups of an unknown name fail with
the valid names and the nearest one, and built-ins are registered lazily as ``"module:attribute"``
so that listing names (``--help``, config checks) imports no implementation.

A registration declares the component's settings (``rag_core.components.settings.Setting``) and
any rule over several settings; they join the one settings table, so the config, the CLI, the
notebooks and the sweep know them like any other. Where a component comes from (``origin``) is
``built-in``, ``module NAME`` (a plugin module or file) or ``entry point NAME (DIST)`` (an installed
package's ``rag_core.components`` entry point, loaded on the first lookup).
Left out: unregistering, and versions of a component.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field, replace
from importlib import metadata
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

from rag_core.components.settings import LOADING, SETTINGS, ConfigError, Rule, Setting, did_you_mean

if TYPE_CHECKING:
    from rag_core.components.config_fields import ConfigFields

ENTRY_POINT_GROUP = "rag_core.components"
REGISTRIES: dict[str, "Registry"] = {}  # kind -> its registry, in the order they were created
_ENTRY_POINTS_LOADED = False


class UnknownComponent(ConfigError):
    """A name that no component of that kind is registered under."""


@dataclass(frozen=True)
class Component:
    kind: str  # retriever | chunker | fusion | ...
    name: str
    target: Any  # the implementation, or "module:attribute" imported on first use
    help: str = ""
    settings: tuple[Setting, ...] = ()  # the settings it declares
    origin: str = "built-in"
    options: Mapping[str, Any] = field(default_factory=dict)  # facts of its kind (a fusion: weighted)

    def load(self) -> Any:
        """The implementation (imported now when registered by name)."""
        if isinstance(self.target, str):
            module, _, attribute = self.target.partition(":")
            return getattr(importlib.import_module(module), attribute)
        return self.target

    def key(self, config: ConfigFields) -> tuple:
        """What makes its results differ: its name and the values in `config` of the settings it
        declared and of those it uses (the ``uses`` option: settings declared elsewhere)."""
        names = [setting.name for setting in self.settings] + list(self.options.get("uses", ()))
        return (self.name, *((name, getattr(config, name)) for name in names))

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "help": self.help, "origin": self.origin,
                "settings": [setting.describe() for setting in self.settings],
                **({"options": dict(self.options)} if self.options else {})}


class Registry:
    """Components of one kind by name (iterating gives the names, in registration order). ``setting``
    names the setting that chooses among them."""

    def __init__(self, kind: str, *, plural: str | None = None, setting: str | None = None, group: str = "",
                 reserved: Sequence[str] = ()) -> None:
        self.kind = kind
        self.plural = plural or f"{kind.replace('_', ' ')}s"
        self.setting = setting
        self.group = group or kind
        self.reserved = tuple(reserved)  # names a component may not take (the pipeline's own stage names)
        self._components: dict[str, Component] = {}
        # the names a config chooses (default: the value of `setting`); retrievers parse ``mode``
        self.chosen: Callable[[Any], Sequence[str]] = lambda config: (getattr(config, setting),) if setting else ()
        REGISTRIES[kind] = self

    def register(self, name: str, target: Any = None, *, help: str = "", settings: Sequence[Setting] = (),
                 rules: Sequence[Callable[[Mapping[str, Any]], "tuple[str, str] | None"]] = (),
                 **options: Any) -> Any:
        """Register `target` under `name` (used as a decorator when `target` is left out)."""
        if target is None:
            return lambda implementation: self.register(name, implementation, help=help, settings=settings,
                                                        rules=rules, **options)
        if not name or name in self.reserved:
            raise ValueError(f"{self.kind} name {name!r} is reserved or empty ({', '.join(self.reserved)})")
        origin = _origin(target)
        known = self._components.get(name)
        if known is not None and known.origin != origin:
            raise ValueError(f"{self.kind} {name!r} is registered twice: by {known.origin} and by {origin}")
        owner = f"{self.kind} {name}"
        SETTINGS.declare(*(s if s.group else _grouped(s, self.group) for s in settings), owner=owner,
                         origin=origin)
        for check in rules:
            SETTINGS.add_rule(Rule(check, owner))
        self._components[name] = Component(self.kind, name, target, help, tuple(SETTINGS[s.name] for s in settings),
                                           origin, dict(options))
        return target

    def get(self, name: str) -> Component:
        load_entry_points()
        try:
            return self._components[name]
        except (KeyError, TypeError):
            raise UnknownComponent(self.unknown_message(name)) from None

    def load(self, name: str) -> Any:
        """The implementation registered under `name`."""
        return self.get(name).load()

    def names(self) -> list[str]:
        load_entry_points()
        return list(self._components)

    def unknown_message(self, name: Any) -> str:
        names = self.names()
        return f"unknown {self.kind.replace('_', ' ')} {name!r}; valid {self.plural}: {', '.join(names)}{did_you_mean(name, names)}"

    def __contains__(self, name: object) -> bool:
        return name in self.names()

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def components(self) -> list[Component]:
        load_entry_points()
        return list(self._components.values())

    def __len__(self) -> int:
        return len(self.names())


def _grouped(setting: Setting, group: str) -> Setting:
    return replace(setting, group=group)


def _origin(target: Any) -> str:
    if LOADING:
        return LOADING[-1]
    module = target.partition(":")[0] if isinstance(target, str) else getattr(target, "__module__", "") or ""
    return "built-in" if module == "rag_core" or module.startswith("rag_core.") else f"module {module}"


class loading:
    """Context manager: components registered inside it come from `origin` (a plugin being imported)."""

    def __init__(self, origin: str) -> None:
        self.origin = origin

    def __enter__(self) -> None:
        LOADING.append(self.origin)

    def __exit__(self, *_: Any) -> None:
        LOADING.pop()


def load_entry_points() -> None:
    """Import, once per process, every installed package's ``rag_core.components`` entry point: a
    module that registers components when imported, or ``module:function`` called with no argument."""
    global _ENTRY_POINTS_LOADED
    if _ENTRY_POINTS_LOADED:
        return
    _ENTRY_POINTS_LOADED = True
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(entry.dist, "name", None) or "?"
        with loading(f"entry point {entry.name} ({dist})"):
            try:
                loaded = entry.load()
                if callable(loaded):
                    loaded()
            except ConfigError:
                raise
            except Exception as exc:  # noqa: BLE001 - a broken plugin is named, whatever it raised
                raise ConfigError(f"plugin entry point {entry.name} = {entry.value} (package {dist}) failed to load: "
                                  f"{type(exc).__name__}: {exc}") from exc
