"""Reuse keys derived from the settings table's stage column (``Setting.stage``, ``STAGES``).

A result of one stage (the chunks, an index, a candidate list, a re-ranked order, an answer, the
metrics) depends on the settings of its stage and of every earlier one that apply to the config: a
setting declared by a component (owner ``"<kind> <name>"``) applies only when the config chooses that
component (``Registry.chosen``) or a chosen component ``uses`` it, and a used setting counts no later
than the latest stage of the component's settings (``llm_model``, an answer setting, changes the
candidates of ``query_expansion: multi_query``); the pipeline's and a kind's own settings apply unless
their ``applies`` says otherwise (fusion's: only with several retrievers); a kind's common settings
(``Registry.common``: a chunker's ``chunk_size``, ``overlap``, ``chunk_unit``, ``per_page``) apply only
when a chosen component of that kind reads them (its ``reads=``, all of them when it does not say); a
setting's ``brings`` adds settings to its stage for some of its values (``chunk_unit: tokens`` makes
``embed_model``'s tokenizer part of the chunking, ``child_size`` brings ``chunk_unit``). Each chosen
component with a code version (``Component.version``: a plugin's source hash, or a declared ``version``)
adds it as one more entry, ``code version of <kind> <name>``, at the stage of the setting that chooses it
(a chunker's at ``chunking``): changed code moves the keys a change of component would.

- ``stage_values(config, stage)``: (name, value) of the applying settings of that stage, table order;
- ``key_through(config, stage)``: those of every stage up to `stage` (what its results depend on);
- ``component_key(config, kind, name, through)``: the same as if `name` were the only `kind` chosen,
  less the setting that chooses (what one component's artefact, such as the dense index, depends on);
- ``unheld(config, through, held)``: those up to `through` that a key of an older format, which spells
  out the settings `held`, does not hold (what it must add): code versions are never held.

Every reuse key is one of these, so a new setting is covered by declaring its stage:
- the sweep's groupings (``SweepPoint.chunking_key``, ``build_key``, ``candidates_key``), the cost
  estimate's dense indexes and chunkings, a search's check for an index already built: ``key_through``,
  ``component_key``;
- the candidates cache's key (``rag_core.retrieve.candidates``): ``key_through(config, "candidates")``,
  with what no setting says (the corpus, each retriever's model as loaded and code versions);
- the store's names (``rag_core.retrieve.index``): their format of before (``STORE_FORMAT_1``, frozen:
  stores built before keep their names, nothing is built again or lost) plus ``unheld``: a setting
  declared since joins the chunking folder's name (stages up to ``ingest``) or each retriever's (up to
  ``index``) by its stage, so an index built with another value is never read.
Left out, on purpose: caches addressed by what the computation reads rather than by settings (the
embeddings and cross-encoder scores, by model as loaded and text; the ONNX exports, by the weights'
files), and the sweep's re-rank lock, which follows the score cache (the chunking's settings and the
re-ranker's own, ``Component.key``).
"""

from __future__ import annotations

from typing import Any, Collection, Mapping, Sequence

from rag_core.components.registry import REGISTRIES, VERSION_PREFIX
from rag_core.components.settings import SETTINGS, STAGES

__all__ = ["STAGES", "applying", "component_key", "key_through", "stage_values", "unheld", "value"]


def _chosen(config: Any, choose: Mapping[str, Sequence[str]]) -> dict[str, tuple[str, ...]]:
    """kind -> the names of its components the config chooses (`choose` overrides a kind)."""
    found = {}
    for kind, registry in REGISTRIES.items():
        if kind in choose:
            found[kind] = tuple(choose[kind])
        elif registry.setting is None or registry.setting in SETTINGS:
            found[kind] = tuple(registry.chosen(config))
    return found


def applying(config: Any, choose: Mapping[str, Sequence[str]] | None = None) -> dict[str, str]:
    """name -> stage of every setting that applies to `config` (its ``brings`` included), then of each
    chosen component's code version (``code version of <kind> <name>``: see ``value``)."""
    chosen = _chosen(config, choose or {})
    used: dict[str, int] = {}  # setting -> the latest stage a chosen component that uses it acts at
    for kind, names in chosen.items():
        for component in names:
            for name in _uses(kind, component):
                used[name] = min(used.get(name, len(STAGES)), _acts_until(kind, component))
    unread = _unread(chosen)
    stages: dict[str, str] = {}
    for setting in SETTINGS:
        kind, _, component = setting.owner.partition(" ")
        if component and component not in chosen.get(kind, ()) and setting.name not in used:
            continue
        if setting.name in unread and setting.name not in used:
            continue
        if setting.applies is not None and not setting.applies(config):
            continue
        stages.setdefault(setting.name, STAGES[min(STAGES.index(setting.stage), used.get(setting.name, len(STAGES)))])
    _bring(config, stages)
    for kind, names in chosen.items():
        for name in names:
            component = _component(kind, name)
            if component is not None and component.version is not None:
                stages[component.version_name] = _chooser_stage(kind, name)
    return stages


def _unread(chosen: Mapping[str, Sequence[str]]) -> set[str]:
    """The common settings of a kind (``Registry.common``) that no chosen component of it reads."""
    unread = set()
    for kind, registry in REGISTRIES.items():
        names = chosen.get(kind, ())
        if names:
            unread |= {setting for setting in registry.common
                       if not any(setting in registry.reads(name) for name in names)}
    return unread


def _bring(config: Any, stages: dict[str, str]) -> None:
    """Add what each setting's value brings (``Setting.brings``) at its stage, until nothing changes (a
    brought setting may bring another: ``child_size`` brings ``chunk_unit``, whose ``tokens`` brings the model)."""
    changed = True
    while changed:
        changed = False
        for name, stage in list(stages.items()):
            brings = SETTINGS[name].brings
            for brought in brings(getattr(config, name)) if brings else ():
                if STAGES.index(stage) < STAGES.index(stages.get(brought, STAGES[-1])):
                    stages[brought], changed = stage, True


def _component(kind: str, name: str) -> Any:
    registry = REGISTRIES[kind]
    return registry.get(name) if name in registry.names() else None


def _chooser_stage(kind: str, name: str) -> str:
    """Where a component's code acts first: the stage of the setting that chooses it (else its own latest)."""
    setting = REGISTRIES[kind].setting
    return SETTINGS[setting].stage if setting in SETTINGS else STAGES[_acts_until(kind, name)]


def value(config: Any, name: str) -> Any:
    """The value of entry `name` of ``applying``: a setting's in `config`, or a component's code version."""
    if name.startswith(VERSION_PREFIX):
        kind, _, component = name[len(VERSION_PREFIX):].partition(" ")
        return REGISTRIES[kind].get(component).version
    return getattr(config, name)


def _acts_until(kind: str, name: str) -> int:
    """The latest stage (its index) of the settings of a component and of the one that chooses its kind:
    a setting it uses changes its results, so counts no later (an LLM's model, used by a query expansion,
    changes the candidates)."""
    registry = REGISTRIES[kind]
    own = registry.get(name).settings if name in registry.names() else ()
    chooser = (SETTINGS[registry.setting],) if registry.setting in SETTINGS else ()
    return max((STAGES.index(setting.stage) for setting in (*own, *chooser)), default=0)


def _uses(kind: str, name: str) -> tuple[str, ...]:
    registry = REGISTRIES[kind]
    return tuple(registry.get(name).options.get("uses", ())) if name in registry.names() else ()


def stage_values(config: Any, stage: str, stages: Mapping[str, str] | None = None) -> tuple:
    """(name, value) of the settings of `stage` that apply to `config`, in the table's order."""
    stages = applying(config) if stages is None else stages
    return tuple((name, value(config, name)) for name, of in _ordered(stages) if of == stage)


def key_through(config: Any, stage: str, stages: Mapping[str, str] | None = None) -> tuple:
    """The values of every stage up to and including `stage`: what that stage's results depend on."""
    stages = applying(config) if stages is None else stages
    ordered = _ordered(stages)  # once: the table's order is the same at every stage
    return tuple(tuple((name, value(config, name)) for name, of in ordered if of == earlier)
                 for earlier in STAGES[:STAGES.index(stage) + 1])


def component_key(config: Any, kind: str, name: str, through: str) -> tuple:
    """``key_through`` with `name` the only `kind` chosen, less the setting that chooses `kind`."""
    stages = dict(applying(config, {kind: (name,)}))
    stages.pop(REGISTRIES[kind].setting or "", None)
    return key_through(config, through, stages)


def unheld(config: Any, through: str, held: Collection[str],
           choose: Mapping[str, Sequence[str]] | None = None) -> tuple:
    """(name, value) of the settings of the stages up to `through` that apply to `config` (`choose` as in
    ``applying``) and that `held` does not name, in the table's order: what a key whose own format spells
    out the settings `held` (the store's names) must add, so that a setting declared since needs no edit."""
    stages, last = applying(config, choose), STAGES.index(through)
    return tuple((name, value(config, name)) for name, stage in _ordered(stages)
                 if STAGES.index(stage) <= last and name not in held)


_ORDER: list = [None, {}]  # [(the table's dict, its size) when made, setting -> its position in the table]


def _ordered(stages: Mapping[str, str]) -> list[tuple[str, str]]:
    """Settings in the table's order, then code versions by name."""
    made = (id(SETTINGS._settings), len(SETTINGS._settings))
    if _ORDER[0] != made:  # a setting declared since (listing the table sorts it: not at every key)
        _ORDER[:] = [made, {setting.name: position for position, setting in enumerate(SETTINGS)}]
    order = _ORDER[1]
    return sorted(stages.items(), key=lambda item: (order.get(item[0], len(order)), item[0]))
