"""Fine-tune the embedding model (a bi-encoder) on training queries with hard negatives.

Rows are (query, positive, negative_1..n) with the hard negatives mined by the first stage
(``rag_core.finetune.mining``); the loss is one of ``losses.EMBEDDER_LOSSES`` (``mnrl``, the default:
each query against its positive, every other passage of the batch and the hard negatives).

The batch sampler leaves out duplicates (two groups of one query would be each other's false
negatives). The saved folder is a sentence-transformers model (with its pooling and normalisation),
used as ``--embed-model DIR``; vectors change, so it gets its own dense collection.
Left out: distillation (MarginMSE), asymmetric query/passage towers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rag_core.config import ConfigError
from rag_core.finetune.data import TrainingSet
from rag_core.finetune.losses import loss_spec
from rag_core.finetune.mining import groups
from rag_core.finetune.rows import training_rows
from rag_core.finetune.settings import TrainSettings
from rag_core.finetune.training import TrainingResult, device_and_precision, train, training_arguments
from rag_core.finetune.validation import EmbedValidation


def load_base_embedder(base_model: str, settings: TrainSettings, device: str) -> Any:
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(base_model, device=device)
    model.max_seq_length = settings.max_length
    return model


def train_embedder(data: TrainingSet, base_model: str, out_dir: str | Path, settings: TrainSettings, *,
                   resume_from: Path | None = None, show_progress: bool = False) -> TrainingResult:
    """Train a bi-encoder from `base_model` and save the best checkpoint by validation nDCG@10 into `out_dir`."""
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from sentence_transformers.base.sampler import BatchSamplers

    spec = loss_spec("embedder", settings.loss)
    found = groups(data.train, data.passages, settings.negatives, settings.seed, settings.negatives_skip)
    out_dir = Path(out_dir)
    device, precision = device_and_precision(settings.device, settings.precision)
    model = load_base_embedder(base_model, settings, device)
    validation = EmbedValidation(data.validation, data.passages, settings.validation_depth)
    arguments = training_arguments(SentenceTransformerTrainingArguments, settings, out_dir, precision, device,
                                   batch_sampler=BatchSamplers.NO_DUPLICATES)

    def make_trainer(callbacks: list) -> Any:
        return SentenceTransformerTrainer(model=model, args=arguments, train_dataset=training_rows(found, spec.layout, "anchor"),
                                          loss=spec.build(model, settings.negatives), evaluator=validation,
                                          callbacks=callbacks)

    return train(make_trainer, validation, settings, out_dir, device, precision, resume_from, show_progress)
