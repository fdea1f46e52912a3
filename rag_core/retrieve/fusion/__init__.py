"""Rank fusion: merge the ranked lists of several retrievers into one. The registry (``FUSIONS``,
the ``fusion`` setting) holds the project's Reciprocal Rank Fusion (``rrf``, ``fusion/rrf.py``) and
``ranx.fuse``'s methods (``fusion/ranx.py``); weighted methods take one weight per retriever (from
``mode``'s ``name:weight`` list or ``fusion_weights``).

A fusion is registered as a class ``(name, config)`` whose ``fuse(ranked, weights)`` takes the
retrievers' lists (``ScoredId`` best first, one list per retriever, in ``mode`` order) and their
weights (None: equal) and returns one fused list, best first. Options: ``weighted`` (it uses weights).
Left out: ranx's supervised methods (they need training runs at query time).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from rag_core.components import SETTINGS, Registry, Rule, Setting
from rag_core.retrieve.fusion.rrf import RRF, reciprocal_rank_fusion
from rag_core.retrieve.retrievers import BUILT_IN_MODES, parse_mode

if TYPE_CHECKING:
    from rag_core.components.config_fields import ConfigFields

__all__ = ["FUSIONS", "FUSION_NORMS", "RANX_METHODS", "RRF", "make_fusion", "reciprocal_rank_fusion"]

FUSIONS = Registry("fusion", setting="fusion", group="fusion")
FUSIONS.register("rrf", RRF, weighted=True, help="Reciprocal Rank Fusion: sum of w / (rrf_k + rank)")
# ranx.fuse methods (Bassani & Romelli, CIKM 2022): name -> takes weights
RANX_METHODS = {"sum": False, "mnz": False, "max": False, "min": False, "med": False, "anz": False, "gmnz": False,
                "isr": False, "log_isr": False, "logn_isr": False, "rbc": False, "bordafuse": False,
                "condorcet": False, "wsum": True, "wmnz": True, "mixed": True, "w_bordafuse": True, "w_condorcet": True}
for _method, _weighted in RANX_METHODS.items():
    FUSIONS.register(_method, "rag_core.retrieve.fusion.ranx:RanxFusion", weighted=_weighted,
                     help=f"ranx.fuse method {_method!r} after fusion_norm" + (", weighted" if _weighted else ""))
FUSION_NORMS = ("min-max", "max", "sum", "zmuv", "rank", "borda", "none")


def make_fusion(config: ConfigFields) -> Any:
    """The configured fusion (``fusion`` and its settings)."""
    return FUSIONS.load(config.fusion)(config.fusion, config)


def _weights_fit_the_retrievers(values: Mapping[str, Any]) -> tuple[str, str] | None:
    weights, mode = values["fusion_weights"], values["mode"]
    try:
        choices = parse_mode(mode)
    except ValueError:
        return None  # mode's own check says what is wrong with it
    if weights and any(choice.weight is not None for choice in choices):
        return "fusion_weights", "fusion_weights must be empty when mode gives the weights (name:weight)"
    if mode in BUILT_IN_MODES:
        if len(weights) not in (0, 2):
            return "fusion_weights", "fusion_weights must be two finite numbers >= 0 (dense, bm25), or empty"
    elif len(weights) not in (0, len(choices)):
        return "fusion_weights", (f"fusion_weights must hold one number per retriever of mode "
                                  f"({', '.join(choice.name for choice in choices)}), or be empty")
    return None


def _weights_need_a_weighted_fusion(values: Mapping[str, Any]) -> tuple[str, str] | None:
    try:
        inline = any(choice.weight is not None for choice in parse_mode(values["mode"]))
    except ValueError:
        return None
    fusion = values["fusion"]
    if (values["fusion_weights"] or inline) and fusion in FUSIONS and not FUSIONS.get(fusion).options.get("weighted"):
        weighted = ", ".join(name for name in FUSIONS if FUSIONS.get(name).options.get("weighted"))
        if values["fusion_weights"]:
            return "fusion_weights", f"fusion_weights apply to fusion {weighted} only, not {fusion}"
        return "mode", f"mode weights (name:weight) apply to fusion {weighted} only, not {fusion}"
    return None


def _fuses(config: ConfigFields) -> bool:
    """Whether the config fuses lists (several retrievers): only then do fusion's settings apply."""
    return len(parse_mode(config.mode)) > 1


SETTINGS.declare(
    Setting("rrf_k", int, 60, "Reciprocal Rank Fusion constant", minimum=0, group="fusion", stage="candidates"),
    Setting("fusion", str, "rrf", "how the retrievers' lists merge: rrf, or a ranx method (wsum, wmnz, sum, mnz, max, ...)",
            choices=FUSIONS.names, group="fusion", stage="candidates", applies=_fuses),
    Setting("fusion_norm", str, "min-max", "score normalisation before a ranx fusion: min-max | zmuv | max | sum | "
            "rank | borda | none", choices=FUSION_NORMS, group="fusion", stage="candidates",
            applies=_fuses),
    Setting("fusion_weights", tuple[float, ...], (), "weights of the retrievers' lists in mode order, comma-separated "
            "(dense, bm25 for hybrid; empty: equal); see tune-fusion", minimum=0, group="fusion", stage="candidates",
            applies=_fuses),
    owner="fusion")
SETTINGS.add_rule(Rule(_weights_fit_the_retrievers, "fusion"))
SETTINGS.add_rule(Rule(_weights_need_a_weighted_fusion, "fusion"))
