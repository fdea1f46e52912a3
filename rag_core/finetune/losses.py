"""The training losses by name, for both trainers (``--loss``), importing sentence-transformers only
when one is built, so that listing them (``rag-pipeline finetune --help``) stays fast.

Re-ranker (``CrossEncoder``) losses, with the layout of the rows each reads:

- ``lce`` (listwise; the default): softmax cross-entropy over a group (the positive and its hard
  negatives) with the relevant passage as the target: the localized contrastive estimation of Gao, Dai
  & Callan, "Rethink Training of BERT Rerankers in Multi-Stage Retrieval Pipeline" (ECIR 2021), which
  beats pointwise training on the same negatives. It is ListNet's loss with log-labels (0 for relevant,
  -inf for the rest), so that the target distribution is one-hot.
- ``listnet`` (listwise): ListNet (Cao et al., ICML 2007) as sentence-transformers has it: the target
  is softmax(labels), which for binary labels is soft (0.475 for the positive of a group of four), so
  the loss can fall only from ln 4 = 1.386 (uniform scores) to 1.268 (the target's entropy): a weak signal.
- ``lambda`` (listwise): LambdaLoss with the NDCG-Loss2++ weights (Wang et al., CIKM 2018).
- ``bce`` (pointwise): binary cross-entropy on each (query, passage) pair, monoBERT's loss (Nogueira &
  Cho, 2019).
- ``mnrl`` / ``cmnrl`` (tuples): in-batch negatives (the batch's other passages) plus the hard negatives;
  ``cmnrl`` computes them in mini-batches (GradCache) to fit larger batches.

Embedder (``SentenceTransformer``) losses, rows (anchor, positive, negative_1..n):

- ``mnrl`` (the default): MultipleNegativesRankingLoss, InfoNCE over the batch and the hard negatives
  (Henderson et al., "Efficient Natural Language Response Suggestion for Smart Reply", 2017).
- ``cmnrl``: the same with GradCache (Gao et al., "Scaling Deep Contrastive Learning Batch Size under
  Memory Limited Setup", 2021).
Left out: distillation losses (MarginMSE), which need a teacher's scores.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from rag_core.config import ConfigError

LAYOUTS = ("listwise", "pointwise", "tuples")
CACHED_MINI_BATCH = 16  # pairs or texts per forward pass of the cached (GradCache) losses


@dataclass(frozen=True)
class LossSpec:
    layout: str  # the rows it reads (LAYOUTS)
    build: Callable[[Any, int], Any]  # (model, hard negatives per group) -> loss module

    @property
    def splittable(self) -> bool:
        """Whether a step may go through the model in passes (micro-batches): each listwise group is scored on its
        own; tuples compare the whole batch (in-batch negatives)."""
        return self.layout == "listwise"


def _cross_encoder(name: str, **options: Any) -> Callable[[Any, int], Any]:
    def build(model: Any, negatives: int) -> Any:
        from sentence_transformers.cross_encoder import losses

        extra = {"num_negatives": max(1, negatives)} if "MultipleNegatives" in name else {}
        return getattr(losses, name)(model, **extra, **options)
    return build


def _lce(model: Any, negatives: int) -> Any:
    import torch
    from sentence_transformers.cross_encoder.losses import ListNetLoss

    class LocalizedContrastiveLoss(ListNetLoss):
        """ListNet with log-labels: softmax(log 1, log 0, ...) is the one-hot target of LCE."""

        def forward(self, inputs: Any, labels: Any, **options: Any) -> Any:
            return super().forward(inputs, [torch.log(label.float()) for label in labels], **options)

    return LocalizedContrastiveLoss(model)


def _bi_encoder(name: str, **options: Any) -> Callable[[Any, int], Any]:
    def build(model: Any, negatives: int) -> Any:
        from sentence_transformers.sentence_transformer import losses

        return getattr(losses, name)(model, **options)
    return build


RERANKER_LOSSES: dict[str, LossSpec] = {
    "lce": LossSpec("listwise", _lce),
    "listnet": LossSpec("listwise", _cross_encoder("ListNetLoss")),
    "lambda": LossSpec("listwise", _cross_encoder("LambdaLoss")),
    "bce": LossSpec("pointwise", _cross_encoder("BinaryCrossEntropyLoss")),
    "mnrl": LossSpec("tuples", _cross_encoder("MultipleNegativesRankingLoss")),
    "cmnrl": LossSpec("tuples", _cross_encoder("CachedMultipleNegativesRankingLoss", mini_batch_size=CACHED_MINI_BATCH)),
}
EMBEDDER_LOSSES: dict[str, LossSpec] = {
    "mnrl": LossSpec("tuples", _bi_encoder("MultipleNegativesRankingLoss")),
    "cmnrl": LossSpec("tuples", _bi_encoder("CachedMultipleNegativesRankingLoss", mini_batch_size=CACHED_MINI_BATCH)),
}
LOSSES = {"reranker": RERANKER_LOSSES, "embedder": EMBEDDER_LOSSES}


def loss_spec(kind: str, name: str) -> LossSpec:
    """The loss `name` of trainer `kind`; ``ConfigError`` listing the valid names otherwise."""
    table = LOSSES[kind]
    if name not in table:
        raise ConfigError(f"unknown {kind} loss {name!r}; valid losses: {', '.join(table)}")
    return table[name]
