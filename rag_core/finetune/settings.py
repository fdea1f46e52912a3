"""The settings of one fine-tuning run, checked before anything is loaded.

One frozen dataclass for both trainers; each trainer has its own table of losses (``RERANKER_LOSSES``
in ``reranker``, ``EMBEDDER_LOSSES`` in ``embedder``). ``batch_size`` counts query groups (a query,
one positive and its negatives), so a re-ranker step scores ``batch_size * (1 + negatives)`` pairs.
A newly initialised classification head learns at ``head_learning_rate`` (the body at
``learning_rate``): a head that starts from random weights and moves at a body's rate learns little
in a few hundred steps.

Recipes (``--recipe``, ``RECIPES``): named settings per kind. ``default`` is the CPU recipe measured on
SciFact (``KIND_DEFAULTS``); ``gpu`` holds the choices that converged on one GPU in issue 42 (docs/fine-tuning.md
lists both; tests/test_finetune_gpu.py checks that the page and this table agree). A recipe also names the
first-stage depth negatives are drawn from (``negatives_depth``), which is a setting of the data, not the trainer.
``time_budget`` (minutes, 0 = none) stops a training at the first step after it is spent; the best checkpoint by
validation is kept (``rag_core.finetune.training.TimeBudget``).
``micro_batch`` splits a re-ranker's step into passes whose gradients are accumulated (``groups_per_pass``), so that
a GPU recipe's step fits a CPU's memory; the step, its gradient and the schedule are the same.
Left out: schedules other than linear warm-up and decay.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from rag_core.config import ConfigError

DEVICES = ("auto", "cpu", "cuda")
PRECISIONS = ("auto", "fp32", "bf16")  # auto: bf16 where the device runs it natively (fp16 on older GPUs), else fp32
NEGATIVE_SOURCES = ("bm25", "dense", "hybrid")  # retrieval modes that hard negatives can be mined with
# kind -> the settings that differ from TrainSettings' defaults: the recipes measured on SciFact
# (docs/fine-tuning.md). A cross-encoder grown from a bi-encoder's body needs a high rate: at 5e-5 its validation
# nDCG@10 rose from 0.23 to 0.39 in 100 steps of 4 groups, at 2e-4 to 0.52 (4e-4 was slower again).
# The embedder (485 claims, 17 steps an epoch): at 3e-5 its validation nDCG@10 still rose after one
# epoch (0.669 -> 0.685 at step 16, best 0.697 at step 32) and the held-out claims gained +0.058.
KIND_DEFAULTS: dict[str, dict[str, Any]] = {
    "reranker": {"loss": "lce", "learning_rate": 2e-4, "head_learning_rate": 1e-3, "batch_size": 4,
                 "negatives": 7},
    "embedder": {"loss": "mnrl", "learning_rate": 3e-5, "epochs": 3.0, "eval_steps": 8, "batch_size": 32,
                 "negatives": 1},
}


@dataclass(frozen=True)
class Recipe:
    name: str
    settings: dict[str, dict[str, Any]]  # kind -> the TrainSettings that differ from the dataclass' defaults
    negatives_depth: dict[str, int]  # kind -> first-stage candidates per query that negatives are drawn from
    note: str


# The GPU recipe: issue 42's converged choices on one H200 (bf16). Re-ranker: listwise softmax (lce) over one positive
# and 15 negatives from BM25's top 100, 16 questions a step (256 pairs), body 1e-4 / head 1e-3, 10% warm-up then
# linear decay, 256 tokens a pair, 10 epochs (0.773 at 10 epochs, 0.7785 at 20 on the test claims, by the issue).
# Embedder: in-batch negatives plus one BM25 negative from the top 30, 64 pairs a step, 3e-5, 10 epochs. No early
# stopping (the schedule runs out; the best checkpoint by validation is kept), validation about once an epoch of
# SciFact's training claims, re-ranker validation over the same top 100 that is re-ranked at test time.
RECIPES: dict[str, Recipe] = {
    "default": Recipe("default", KIND_DEFAULTS, {"reranker": 30, "embedder": 30},
                      "the CPU recipe: few steps, early stopping (2 cores)"),
    "gpu": Recipe("gpu", {
        "reranker": {"loss": "lce", "epochs": 10.0, "learning_rate": 1e-4, "head_learning_rate": 1e-3,
                     "batch_size": 16, "negatives": 15, "max_length": 256, "warmup": 0.1, "eval_steps": 30,
                     "patience": 0, "validation_depth": 100},
        "embedder": {"loss": "mnrl", "epochs": 10.0, "learning_rate": 3e-5, "batch_size": 64, "negatives": 1,
                     "max_length": 256, "warmup": 0.1, "eval_steps": 8, "patience": 0},
    }, {"reranker": 100, "embedder": 30}, "issue 42's converged choices for one GPU (bf16)"),
}
LOADER_WORKERS_GPU = 4  # data-loading processes on a GPU (tokenising batches ahead of the model); 0 on a CPU
# Re-ranker pairs per forward and backward pass on a CPU when micro_batch is auto: the gpu recipe's step (16 groups
# of 16 pairs, 256 tokens) in one pass took more than the 24 GB of a 2-core machine and was killed; the default
# recipe's step (4 x 8 pairs) fits in one pass as before.
MICRO_BATCH_PAIRS_CPU = 32

# --self-supervised: thousands of pseudo-queries rather than hundreds of questions, so one epoch, fewer
# validations (each embeds every validation candidate), passages cut to 128 tokens while training (MiniLM's
# own training length; the saved model still searches at its base's length), at a lower rate than the golden
# recipe's (the pairs are noisier than questions, and the base model should not drift far from what it knows).
# Measured on SciFact: about 14 CPU-seconds a step of 32 pairs on one core (docs/self-supervised.md).
SELF_SUPERVISED_DEFAULTS: dict[str, Any] = {"epochs": 1.0, "eval_steps": 50, "learning_rate": 2e-5, "max_length": 128}


@dataclass(frozen=True)
class TrainSettings:
    loss: str
    epochs: float = 1.0
    learning_rate: float = 5e-5
    head_learning_rate: float = 0.0  # 0: the same as learning_rate
    batch_size: int = 8  # query groups per step
    negatives: int = 7  # hard negatives per (query, positive)
    negatives_skip: int = 0  # first-stage ranks never drawn as negatives
    max_length: int = 256  # tokens of a (query, passage) pair, or of a passage for an embedder
    warmup: float = 0.1  # share of the steps with a rising learning rate
    eval_steps: int = 50  # steps between validations (and checkpoints)
    patience: int = 3  # validations without a better nDCG@10 before stopping; 0 = never stop early
    validation_depth: int = 20  # candidates per validation query
    seed: int = 0
    device: str = "auto"  # auto | cpu | cuda
    precision: str = "auto"  # PRECISIONS
    max_steps: int = 0  # 0: as many as the epochs take
    time_budget: float = 0.0  # minutes of training; 0 = no budget
    loader_workers: int = -1  # data-loading processes; -1 = auto (LOADER_WORKERS_GPU on a GPU, 0 on a CPU)
    micro_batch: int = -1  # re-ranker groups per forward/backward pass, gradients accumulated over a step; -1 = auto

    def __post_init__(self) -> None:
        checks = [
            (math.isfinite(self.epochs) and self.epochs > 0, "epochs must be > 0"),
            (math.isfinite(self.learning_rate) and 0 < self.learning_rate < 1, "learning_rate must be between 0 and 1"),
            (math.isfinite(self.head_learning_rate) and 0 <= self.head_learning_rate < 1,
             "head_learning_rate must be between 0 and 1 (0 = learning_rate)"),
            (self.batch_size > 0, "batch_size must be > 0"),
            (self.negatives >= 0, "negatives must be >= 0"),
            (self.negatives_skip >= 0, "negatives_skip must be >= 0"),
            (self.max_length >= 8, "max_length must be >= 8"),
            (math.isfinite(self.warmup) and 0 <= self.warmup < 1, "warmup must be >= 0 and < 1"),
            (self.eval_steps > 0, "eval_steps must be > 0"),
            (self.patience >= 0, "patience must be >= 0"),
            (self.validation_depth > 0, "validation_depth must be > 0"),
            (self.device in DEVICES, f"device must be one of {', '.join(DEVICES)}"),
            (self.precision in PRECISIONS, f"precision must be one of {', '.join(PRECISIONS)}"),
            (self.max_steps >= 0, "max_steps must be >= 0"),
            (math.isfinite(self.time_budget) and self.time_budget >= 0, "time_budget must be >= 0 minutes (0 = none)"),
            (self.loader_workers >= -1, "loader_workers must be >= 0 (or -1 = auto)"),
            (self.micro_batch == -1 or 0 < self.micro_batch <= self.batch_size and self.batch_size % self.micro_batch == 0,
             "micro_batch must divide batch_size (or -1 = auto)"),
        ]
        for ok, message in checks:
            if not ok:
                setting = message.split()[0]
                raise ConfigError(f"{message}, got {getattr(self, setting)!r}")

    @classmethod
    def for_kind(cls, kind: str, recipe: str = "default", **given: Any) -> "TrainSettings":
        """The settings of trainer `kind` (``reranker`` | ``embedder``): the `recipe`'s (``RECIPES``), then
        `given` (None values left out)."""
        return cls(**{**recipe_named(recipe).settings[kind],
                      **{key: value for key, value in given.items() if value is not None}})

    def as_params(self) -> dict[str, str]:
        return {f"finetune_{key}": str(value) for key, value in asdict(self).items()}

    def resume_key(self) -> dict[str, Any]:
        """What must be equal for a checkpoint to be resumed (everything but where and how long it runs)."""
        return {key: value for key, value in asdict(self).items()
                if key not in ("device", "precision", "time_budget", "loader_workers", "micro_batch")}

    def groups_per_pass(self, device: str, splittable: bool) -> int:
        """Query groups per forward and backward pass on `device` (``cpu`` | ``cuda``); a step accumulates the
        gradients of ``batch_size / groups_per_pass`` passes, so it is the same step with less memory. Only a
        loss whose groups are independent (`splittable`: a re-ranker's listwise losses) is split: in-batch
        negatives need the whole batch (``cmnrl`` saves memory there). Auto (-1): the whole step on a GPU; on
        a CPU the most groups, dividing ``batch_size``, whose pairs fit ``MICRO_BATCH_PAIRS_CPU``."""
        if not splittable:
            if self.micro_batch not in (-1, self.batch_size):
                raise ConfigError(f"micro_batch {self.micro_batch}: this loss ({self.loss}) compares the whole batch "
                                  "in one pass; micro-batches apply to a re-ranker's listwise losses (use cmnrl to "
                                  "save memory with in-batch negatives)")
            return self.batch_size
        if self.micro_batch > 0:
            return self.micro_batch
        if device == "cuda":
            return self.batch_size
        pairs = 1 + self.negatives
        return max((n for n in range(1, self.batch_size + 1)
                    if self.batch_size % n == 0 and n * pairs <= MICRO_BATCH_PAIRS_CPU), default=1)


def recipe_named(name: str) -> Recipe:
    """The recipe `name`; ``ConfigError`` listing the valid names otherwise."""
    if name not in RECIPES:
        raise ConfigError(f"unknown recipe {name!r}; valid recipes: {', '.join(RECIPES)}")
    return RECIPES[name]
