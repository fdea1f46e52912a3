"""Fine-tuning: a re-ranker (cross-encoder) or the embedding model trained on a golden set's (or a
BEIR split's) queries, with hard negatives mined by the workbench's own first stage.

Modules, in the order a run uses them: ``data`` (positives, first-stage candidates, validation split,
the train/test guard), ``mining`` (hard negatives), ``rows`` (the rows a loss reads), ``losses`` (the
losses by name), ``settings``, ``validation`` (nDCG@10 during training), ``training`` (the shared loop:
early stopping, checkpoints, device, progress), ``reranker`` and ``embedder`` (the two trainers),
``base_models`` (what training starts from), ``fingerprints`` (training-query and weights
fingerprints; ``check_trained_on``), ``heldout`` (test figures with and without the model),
``significance`` (paired tests), ``fusion`` (``rerank_fusion``), ``tracking`` (MLflow), ``output`` (where the
model is written: a folder of someone else's files is refused, or set aside with ``force``), ``run`` (one
fine-tuning, start to finish). ``settings.RECIPES`` names the recipes (``default`` for a CPU, ``gpu``). Without labelled queries: ``pseudo_queries`` (pairs made from the
documents) and ``self_supervised`` (``--self-supervised``: those pairs through the same trainers).
"""

from rag_core._lazy import lazy_exports

__getattr__, __all__ = lazy_exports(__name__, {
    "FinetuneJob": "run", "FinetuneOutcome": "run", "run_finetune": "run",
    "TrainSettings": "settings", "TrainingResult": "training", "TrainingSet": "data", "TrainingQuery": "data",
    "build_training_set": "data", "ensure_disjoint": "data", "TrainTestOverlap": "data",
    "train_reranker": "reranker", "train_embedder": "embedder", "RERANKER_LOSSES": "losses",
    "EMBEDDER_LOSSES": "losses", "check_trained_on": "fingerprints", "trained_on_warnings": "fingerprints",
    "write_training_queries": "fingerprints", "weights_fingerprint": "fingerprints",
    "model_cache_name": "fingerprints",
    "paired_comparison": "significance", "PairedComparison": "significance", "HeldOutReport": "heldout",
    "rerank_heldout": "heldout", "embed_heldout": "heldout",
    "PseudoQuery": "pseudo_queries", "PseudoQueryRecipe": "pseudo_queries", "build_pseudo_queries": "pseudo_queries",
    "SelfSupervisedJob": "self_supervised", "run_self_supervised": "self_supervised",
    "RECIPES": "settings", "Recipe": "settings", "check_output": "output", "OutputNotOurs": "output",
})
