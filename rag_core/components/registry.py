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

Two registration options say what a component's results depend on besides its settings:

- ``reads=(...)``: which of its kind's common settings (``Registry.common``: a chunker's ``chunk_size``,
  ``overlap``, ``chunk_unit``, ``per_page``) it reads; left out, it reads them all. The others do not
  apply to a config that chooses it (``rag_core.components.stages``): they enter none of its keys.
- ``version="..."``: its code version (``Component.version``). Left out, a plugin's is a hash of its
  source (``source_version``: the files of its class's module and of its base classes outside
  ``rag_core``, read when it registers), so changed code never reuses results and unchanged code
  does; a built-in's is None unless it declares one: its results are held by the store's format and
  a built-in whose code changes its results declares (or raises) ``version``.
Left out: unregistering; code a plugin imports from modules of its own other than its class's (declare
``version`` for such a plugin).
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import inspect
import logging
import sys
import uuid
from dataclasses import dataclass, field, replace
from importlib import metadata
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

from rag_core.components.settings import LOADING, SETTINGS, ConfigError, Rule, Setting, did_you_mean

if TYPE_CHECKING:
    from rag_core.components.config_fields import ConfigFields

ENTRY_POINT_GROUP = "rag_core.components"
REGISTRIES: dict[str, "Registry"] = {}  # kind -> its registry, in the order they were created
_ENTRY_POINTS_LOADED = False
VERSION_PREFIX = "code version of "  # keys hold (VERSION_PREFIX + "<kind> <name>", version)
_PROCESS_VERSION = uuid.uuid4().hex[:12]  # the version of code whose source cannot be read: this process's only
log = logging.getLogger(__name__)


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
    options: Mapping[str, Any] = field(default_factory=dict)  # facts of its kind (a fusion: weighted), uses, reads
    source_version: str | None = None  # a plugin's source hash, read when it registered (None: not read yet)

    @functools.cached_property
    def version(self) -> str | None:
        """Its code version, part of the key of its stage: the declared ``version``; else, for a plugin, a
        hash of its source (``source_version``); else None (a built-in: held by the store's format)."""
        declared = self.options.get("version")
        if declared is not None:
            return str(declared)
        if self.origin == "built-in":
            return None
        return self.source_version or source_version(self.target)

    def load(self) -> Any:
        """The implementation (imported now when registered by name)."""
        if isinstance(self.target, str):
            module, _, attribute = self.target.partition(":")
            return getattr(importlib.import_module(module), attribute)
        return self.target

    def key(self, config: ConfigFields) -> tuple:
        """What makes its results differ: its name, the values in `config` of the settings it declared
        and of those it uses (the ``uses`` option: settings declared elsewhere), and its code version."""
        names = [setting.name for setting in self.settings] + list(self.options.get("uses", ()))
        version = ((self.version_name, self.version),) if self.version is not None else ()
        return (self.name, *((name, getattr(config, name)) for name in names), *version)

    @property
    def version_name(self) -> str:
        """How keys name its code version: ``code version of chunker mine`` (no setting is named so)."""
        return f"{VERSION_PREFIX}{self.kind} {self.name}"

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "help": self.help, "origin": self.origin,
                "settings": [setting.describe() for setting in self.settings],
                **({"options": dict(self.options)} if self.options else {})}


class Registry:
    """Components of one kind by name (iterating gives the names, in registration order). ``setting``
    names the setting that chooses among them; ``common`` the settings of the kind that each of them reads
    unless its registration says otherwise (``reads=``)."""

    def __init__(self, kind: str, *, plural: str | None = None, setting: str | None = None, group: str = "",
                 reserved: Sequence[str] = (), common: Sequence[str] = ()) -> None:
        self.kind = kind
        self.plural = plural or f"{kind.replace('_', ' ')}s"
        self.setting = setting
        self.group = group or kind
        self.reserved = tuple(reserved)  # names a component may not take (the pipeline's own stage names)
        self.common = tuple(common)  # settings every component of the kind may read (set where they are declared)
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
        options = self._checked_options(name, options)
        owner = f"{self.kind} {name}"
        SETTINGS.declare(*(s if s.group else _grouped(s, self.group) for s in settings), owner=owner,
                         origin=origin)
        for check in rules:
            SETTINGS.add_rule(Rule(check, owner))
        source = source_version(target) if origin != "built-in" and "version" not in options and \
            not isinstance(target, str) else None  # read now: the file that is running, not a later edit of it
        self._components[name] = Component(self.kind, name, target, help, tuple(SETTINGS[s.name] for s in settings),
                                           origin, options, source)
        return target

    def _checked_options(self, name: str, options: Mapping[str, Any]) -> dict[str, Any]:
        """`options` with ``reads`` as a tuple of this kind's common settings and ``version`` a plain string."""
        options = dict(options)
        if "reads" in options:
            reads = options["reads"]
            reads = (reads,) if isinstance(reads, str) else tuple(reads)
            unknown = [setting for setting in reads if setting not in self.common]
            if unknown:
                raise ValueError(f"{self.kind} {name!r}: reads={unknown[0]!r} is not a common setting of "
                                 f"{self.plural} (they are: {', '.join(self.common) or 'none'})")
            options["reads"] = reads
        if "version" in options and (not isinstance(options["version"], str) or not options["version"].strip()):
            raise ValueError(f"{self.kind} {name!r}: version must be a non-empty string, got {options['version']!r}")
        return options

    def reads(self, name: str) -> tuple[str, ...]:
        """The common settings (``common``) component `name` reads: all of them unless it registered with
        ``reads=``, or when no component of that name is registered."""
        component = self._components.get(name)
        return tuple(component.options.get("reads", self.common)) if component is not None else self.common

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


def source_version(target: Any) -> str | None:
    """A hash of the source of `target` (a class or function, or ``"module:attribute"``): the files of the
    modules that define it and its base classes, those of ``rag_core``, the standard library and builtins
    left out (their code is the workbench's, versioned with it); None when there is none of its own.
    Code without a readable source (a class typed into a Python prompt) gets this process's own version,
    so nothing it made is ever reused by another process, and a warning says to declare ``version``."""
    if isinstance(target, str):
        found = importlib.util.find_spec(target.partition(":")[0])  # its file, without importing it
        sources = [_read(found.origin)] if found is not None and found.origin else []
        return _hash(sources) if sources and None not in sources else _process_version(target)
    sources = []
    for item in inspect.getmro(target) if inspect.isclass(target) else (target,):
        module = getattr(item, "__module__", "") or ""
        if module == "builtins" or module.split(".")[0] in ("rag_core", *sys.stdlib_module_names):
            continue
        path = getattr(sys.modules.get(module), "__file__", None)
        text = _read(path) if path else None
        if text is None:
            try:
                text = inspect.getsource(item).encode()
            except (OSError, TypeError):
                return _process_version(getattr(item, "__qualname__", repr(item)))
        if text not in sources:
            sources.append(text)
    return _hash(sources) if sources else None


def _read(path: str | None) -> bytes | None:
    try:
        return open(path, "rb").read() if path else None  # noqa: SIM115 - a small source file
    except OSError:
        return None


def _hash(sources: Sequence[bytes]) -> str:
    digest = hashlib.sha256()
    for text in sources:
        digest.update(hashlib.sha256(text).digest())
    return digest.hexdigest()[:12]


@functools.lru_cache(maxsize=None)
def _process_version(what: str) -> str:
    log.warning("[rag] the source of %s cannot be read: what it makes is reused in this process only; "
                "register it with version=\"...\" to reuse it across runs", what)
    return f"process-{_PROCESS_VERSION}"


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
