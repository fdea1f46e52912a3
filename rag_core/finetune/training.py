"""The training loop both trainers share, around sentence-transformers' trainers (Hugging Face's).

- Validation (``rag_core.finetune.validation``) before the first step and every ``eval_steps``, and
  early stopping after ``patience`` validations without a better nDCG@10; the best checkpoint is what
  is saved.
- Checkpoints under ``<out>/checkpoints/`` every ``eval_steps`` (model, optimizer, scheduler, data
  order), with ``resume.json`` holding the settings and the training data's fingerprint: a stopped
  training resumes with ``resume=True`` only when both are unchanged; a directory with another
  training's checkpoints is refused. The checkpoints are removed once the model is saved.
- The device: a CUDA GPU when there is one (``device auto``), else the CPU; the precision
  (``precision auto``): bf16 where the device runs it natively (a GPU that supports it, a CPU with
  AVX512-BF16 or AMX: on 2 such cores a MiniLM cross-encoder trains about 1.3x faster than in
  fp32), fp16 on other GPUs, fp32 elsewhere.
- A progress bar over the steps, with the last training loss and validation nDCG@10.
- A time budget (``time_budget`` minutes, ``TimeBudget``): once spent, the step that ends it is validated
  and checkpointed and training stops; the best checkpoint by validation (of every validation so far) is
  what is saved, as after a full run. Validations count towards the budget (they are part of training).
- Data loading on a GPU: ``LOADER_WORKERS_GPU`` worker processes tokenise batches ahead of the model and
  batches go through pinned memory; on a CPU loading stays in the training process, as before.

Shapes: ``TrainingResult`` (curve: ``CurvePoint`` per validation, losses: (step, loss) per log).
Left out: several GPUs (Accelerate would run them; untested here), gradient accumulation.
"""

from __future__ import annotations

import json
import resource
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from transformers import EarlyStoppingCallback, TrainerCallback

from rag_core.config import ConfigError
from rag_core.finetune.settings import LOADER_WORKERS_GPU, TrainSettings
from rag_core.finetune.validation import BEST_METRIC, CurvePoint
from rag_core.progress import progress

CHECKPOINTS = "checkpoints"
RESUME_FILE = "resume.json"


class CheckpointMismatch(ConfigError):
    """The output directory holds checkpoints of another training (or of this one, without resume)."""


@dataclass(frozen=True)
class TrainingResult:
    model_dir: Path
    steps: int
    best_step: int  # the checkpoint saved as the model (the best validation nDCG@10 after training began)
    curve: tuple[CurvePoint, ...]  # validation nDCG@10 by step, the first before any training
    losses: tuple[tuple[int, float], ...]  # (step, training loss)
    train_seconds: float
    peak_memory_mb: float  # peak resident memory of the process (CPU), or peak GPU memory allocated
    device: str
    precision: str  # fp32 | bf16 | fp16
    resumed_from: str | None = None  # the checkpoint this run continued
    stopped_early: bool = False
    stopped_by_budget: bool = False  # the time budget ended the training (stopped_early is then true as well)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def best(self) -> CurvePoint:
        """The validation point of the saved model."""
        return next((point for point in self.curve if point.step == self.best_step), self.curve[-1])

    @property
    def beat_base(self) -> bool:
        """Whether the saved model validates better than the model training started from."""
        return self.best.ndcg_at_10 > self.curve[0].ndcg_at_10

    def summary(self) -> dict[str, Any]:
        best = self.best
        return {"steps": self.steps, "best_step": best.step, "best_validation_ndcg@10": best.ndcg_at_10,
                "beat_base": self.beat_base,
                "initial_validation_ndcg@10": self.curve[0].ndcg_at_10 if self.curve else None,
                "train_seconds": self.train_seconds, "peak_memory_mb": self.peak_memory_mb, "device": self.device,
                "precision": self.precision, "resumed_from": self.resumed_from, "stopped_early": self.stopped_early,
                "stopped_by_budget": self.stopped_by_budget,
                "curve": [[p.step, p.epoch, p.ndcg_at_10] for p in self.curve],
                "losses": [list(item) for item in self.losses], **self.extra}


def device_and_precision(device: str, precision: str = "auto") -> tuple[str, str]:
    """The device ("cpu" | "cuda") and precision ("fp32" | "bf16" | "fp16") to train in. `device` is
    auto, cpu or cuda; `precision` auto (bf16 where the device runs it natively: a GPU that supports
    it, a CPU with AVX512-BF16 or AMX; fp16 on other GPUs; fp32 elsewhere), fp32 or bf16 (refused
    where it would be emulated, which is slower than fp32)."""
    import torch

    from rag_core.retrieve.bf16 import missing_bf16

    if device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device cuda: no CUDA device is available (use --device auto or cpu)")
    used = "cpu" if device == "cpu" or not torch.cuda.is_available() else "cuda"
    missing = missing_bf16(used)
    if precision == "bf16" and missing:
        raise ConfigError(f"precision bf16: {missing} (use --precision auto or fp32)")
    if precision != "auto":
        return used, precision
    if missing is None:
        return used, "bf16"
    return used, "fp16" if used == "cuda" else "fp32"


def checkpoint_to_resume(out_dir: Path, settings: TrainSettings, data_fingerprint: str, resume: bool) -> Path | None:
    """The checkpoint a resumed training continues from (None: start afresh). Checkpoints of another
    training, or of this one without `resume`, are refused with the way out."""
    folder = out_dir / CHECKPOINTS
    found = sorted(folder.glob("checkpoint-*"), key=lambda path: int(path.name.split("-")[-1])) if folder.is_dir() else []
    wanted = {"settings": settings.resume_key(), "data": data_fingerprint}
    if not found:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / RESUME_FILE).write_text(json.dumps(wanted, indent=1, sort_keys=True))
        return None
    try:
        saved = json.loads((folder / RESUME_FILE).read_text())
    except (OSError, ValueError):
        saved = None
    if saved != wanted:
        raise CheckpointMismatch(f"{folder} holds checkpoints of a training with other settings or data; "
                                 f"delete that folder (or choose another --out) to start afresh")
    if not resume:
        raise CheckpointMismatch(f"{folder} holds checkpoints of an unfinished training ({found[-1].name}): "
                                 f"add --resume to continue it, or delete that folder to start afresh")
    return found[-1]


def training_arguments(arguments_class: type, settings: TrainSettings, out_dir: Path, precision: str,
                       device: str, splittable: bool = False, **extra: Any) -> Any:
    """The trainer's arguments for `settings` (validation, checkpoints, device, precision, data loading; a step
    in passes of ``settings.groups_per_pass`` groups when the loss is `splittable`)."""
    workers = settings.loader_workers if settings.loader_workers >= 0 else LOADER_WORKERS_GPU if device == "cuda" else 0
    per_pass = settings.groups_per_pass(device, splittable)
    return arguments_class(
        output_dir=str(out_dir / CHECKPOINTS), num_train_epochs=settings.epochs,
        max_steps=settings.max_steps or -1, per_device_train_batch_size=per_pass,
        gradient_accumulation_steps=settings.batch_size // per_pass,
        learning_rate=settings.learning_rate, warmup_steps=settings.warmup, seed=settings.seed,
        eval_strategy="steps", eval_steps=settings.eval_steps, eval_on_start=True,
        save_strategy="steps", save_steps=settings.eval_steps, save_total_limit=2,
        load_best_model_at_end=True, metric_for_best_model=BEST_METRIC, greater_is_better=True,
        logging_steps=max(1, min(10, settings.eval_steps)), report_to="none", disable_tqdm=True,
        use_cpu=device == "cpu", bf16=precision == "bf16", fp16=precision == "fp16",
        dataloader_drop_last=False, dataloader_num_workers=workers, dataloader_pin_memory=device == "cuda",
        dataloader_persistent_workers=workers > 0, **extra)


class TimeBudget(TrainerCallback):
    """Stops training at the first step that ends after `minutes` of training (counted from the start of
    training, validations included), after validating and checkpointing that step, so that the trainer's
    best checkpoint (the one saved) is chosen among every validation, the last step's too."""

    clock: Callable[[], float] = staticmethod(time.monotonic)  # seconds; tests replace it

    def __init__(self, minutes: float) -> None:
        self.seconds = minutes * 60
        self.started = 0.0
        self.spent = False

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.started = self.clock()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if self.seconds and not self.spent and self.clock() - self.started >= self.seconds:
            self.spent = True
            control.should_evaluate = control.should_save = control.should_training_stop = True
        return control


class LossBar(TrainerCallback):
    """A progress bar over the training steps showing the last loss and validation nDCG@10."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.bar: Any = None
        self.shown: dict[str, str] = {}

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.enabled:
            self.bar = progress(range(state.max_steps), True, "Training", unit="step")
            self.bar.update(state.global_step)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.bar is not None:
            self.bar.update(state.global_step - self.bar.n)

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any) -> None:
        if self.bar is None or not logs:
            return
        if "loss" in logs:
            self.shown["loss"] = f"{float(logs['loss']):.4f}"
        if BEST_METRIC in logs:
            self.shown["val_ndcg@10"] = f"{float(logs[BEST_METRIC]):.4f}"
        self.bar.set_postfix(self.shown, refresh=True)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.bar is not None:
            self.bar.close()


def train(make_trainer: Callable[[list[TrainerCallback]], Any], validation: Any, settings: TrainSettings,
          out_dir: Path, device: str, precision: str, resume_from: Path | None,
          show_progress: bool = False) -> TrainingResult:
    """Run a trainer made by `make_trainer(callbacks)`, save its model (the best checkpoint's weights,
    which the trainer loads at the end) into `out_dir` and remove the checkpoints."""
    import torch

    budget = TimeBudget(settings.time_budget)
    callbacks: list[TrainerCallback] = [LossBar(show_progress), budget]
    if settings.patience:
        callbacks.append(EarlyStoppingCallback(early_stopping_patience=settings.patience))
    trainer = make_trainer(callbacks)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    if resume_from is not None and show_progress:
        print(f"Resuming from {resume_from}", file=sys.stderr)
    trainer.train(resume_from_checkpoint=str(resume_from) if resume_from else None)
    seconds = time.perf_counter() - started
    peak = (torch.cuda.max_memory_allocated() / 2**20 if device == "cuda"
            else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    history = trainer.state.log_history
    curve = _curve(history, validation)
    losses = tuple((int(row["step"]), float(row["loss"])) for row in history if "loss" in row)
    trainer.model.save_pretrained(str(out_dir))
    shutil.rmtree(out_dir / CHECKPOINTS, ignore_errors=True)
    state = trainer.state
    best = state.best_model_checkpoint
    best_step = int(best.rsplit("-", 1)[-1]) if best else int(state.global_step)
    return TrainingResult(out_dir, int(state.global_step), best_step, curve, losses, seconds, peak, device, precision,
                          str(resume_from) if resume_from else None, state.global_step < state.max_steps,
                          budget.spent)


def _curve(history: list[dict], validation: Any) -> tuple[CurvePoint, ...]:
    """Validation points by step: from the trainer's history (which a resumed run inherits from its
    checkpoint), else from the evaluator's own record."""
    points = {int(row["step"]): CurvePoint(int(row["step"]), float(row.get("epoch", 0.0)), float(row[BEST_METRIC]))
              for row in history if BEST_METRIC in row}
    for point in validation.curve:
        points.setdefault(point.step, point)
    return tuple(points[step] for step in sorted(points))
