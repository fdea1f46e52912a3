"""Fine-tune a cross-encoder (re-ranker) on training queries with hard negatives.

The model is a sentence-transformers ``CrossEncoder`` with one output (a raw logit, as the workbench
scores with), trained by ``CrossEncoderTrainer`` with one of ``losses.RERANKER_LOSSES`` (``lce``,
the default, is softmax cross-entropy over the positive and its hard negatives).

The base model is a cross-encoder, or a bi-encoder's body (e.g. the packaged all-MiniLM-L6-v2), which
gets a new classification head on its [CLS] output; that head (and BERT's pooler under it, which a
bi-encoder trained with mean pooling never used) learns at ``head_learning_rate``. The saved folder is
a plain ``BertForSequenceClassification`` with its tokenizer, so ``--rerank-model DIR`` loads it on
every backend (torch, onnx, onnx-int8), truncating pairs at the ``max_length`` it was trained with.
Left out: distillation from a teacher's scores (MarginMSE), several relevance grades.
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
from rag_core.finetune.validation import RerankValidation

HEAD_PARAMETERS = r"(^|\.)(classifier|pooler)\."  # the parts of BertForSequenceClassification a bi-encoder lacks


def load_base_cross_encoder(base_model: str, settings: TrainSettings, device: str) -> Any:
    """A ``CrossEncoder`` with one raw-logit output from a cross-encoder or a bi-encoder body; a new
    head is initialised from ``settings.seed``."""
    import torch
    from sentence_transformers.cross_encoder import CrossEncoder

    torch.manual_seed(settings.seed)
    return CrossEncoder(base_model, num_labels=1, max_length=settings.max_length, device=device,
                        activation_fn=torch.nn.Identity())


def train_reranker(data: TrainingSet, base_model: str, out_dir: str | Path, settings: TrainSettings, *,
                   resume_from: Path | None = None, show_progress: bool = False) -> TrainingResult:
    """Train a cross-encoder from `base_model` (a local folder or hub name) and save the best
    checkpoint by validation nDCG@10 into `out_dir`."""
    from sentence_transformers.cross_encoder import CrossEncoderTrainer, CrossEncoderTrainingArguments

    spec = loss_spec("reranker", settings.loss)
    layout = spec.layout
    found = groups(data.train, data.passages, settings.negatives, settings.seed, settings.negatives_skip)
    if layout != "pointwise" and not all(g.negatives for g in found):
        raise ConfigError(f"loss {settings.loss} needs at least one hard negative per query; some training queries "
                          f"have none among their {data.depth} candidates (raise the negatives' depth)")
    out_dir = Path(out_dir)
    device, precision = device_and_precision(settings.device, settings.precision)
    model = load_base_cross_encoder(base_model, settings, device)
    validation = RerankValidation(data.validation, data.passages, settings.validation_depth)
    head_rate = {HEAD_PARAMETERS: settings.head_learning_rate} if settings.head_learning_rate else {}
    arguments = training_arguments(CrossEncoderTrainingArguments, settings, out_dir, precision, device,
                                   splittable=spec.splittable, learning_rate_mapping=head_rate)

    def make_trainer(callbacks: list) -> Any:
        return CrossEncoderTrainer(model=model, args=arguments, train_dataset=training_rows(found, spec.layout),
                                   loss=spec.build(model, settings.negatives), evaluator=validation, callbacks=callbacks)

    return train(make_trainer, validation, settings, out_dir, device, precision, resume_from, show_progress)
