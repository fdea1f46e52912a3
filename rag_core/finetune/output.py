"""Where a fine-tuned model is written (``--out DIR``), without ever replacing a user's files unasked.

``check_output(out_dir, force)`` runs before anything is loaded or trained:

- a folder that does not exist, an empty folder, or a model this command wrote earlier (it holds the
  ``training_queries.json`` that ``finetune`` writes, or the ``checkpoints/resume.json`` of a stopped
  training) is written in place, as before (a stopped training resumes there with ``--resume``);
- a folder holding anything else (a project's README, someone's notes) is refused (``OutputNotOurs``,
  exit 2) with the folder's name, a few of its files and the two ways out: a new folder, or ``--force``;
- ``--force`` on such a folder: the model is trained into a new folder beside it (``.<name>.finetune-*``,
  in the same parent, so the final rename stays on one file system). Only when the model is complete
  (weights, ``training_queries.json``, ``finetune.json``) is the user's folder renamed to
  ``<name>.replaced-<date>-<time>`` (kept whole, never deleted) and the new folder renamed to ``<name>``;
  a failed training removes only the new folder. ``--force`` is refused for the current folder or one
  above it (``--out .``): those cannot be set aside under the user's feet.
- ``--out`` naming a file, or a path under a file, is refused.

``staged_output`` is the context manager the runs use: it yields the folder to train into and, when the
block ends without an error, puts the model in place and says where the user's folder went.
Left out: locking against two trainings into one folder at the same time.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from rag_core.errors import BadInput
from rag_core.finetune.fingerprints import TRAINING_FILE, training_fingerprints

SHOWN_FILES = 5


class OutputNotOurs(BadInput):
    """``--out`` holds files that are not a model this command wrote, and ``--force`` was not given."""


@dataclass(frozen=True)
class OutputPlan:
    target: Path  # where the model ends up (--out)
    set_aside: bool  # whether `target` holds a user's files: train beside it, rename it aside once complete


@dataclass(frozen=True)
class Placed:
    model_dir: Path
    set_aside_to: Path | None  # where the user's earlier folder went (None: nothing was set aside)


def written_by_finetune(folder: Path) -> bool:
    """Whether `folder` holds a model (or the checkpoints of a stopped training) this command wrote."""
    return training_fingerprints(folder) is not None or (folder / "checkpoints" / "resume.json").is_file()


def check_output(out_dir: str | Path, force: bool = False) -> OutputPlan:
    """How to write the model for ``--out out_dir`` (see the module's rules); ``BadInput`` before any work.
    Nothing is created: the CLI checks before loading anything, the run again before training."""
    target = Path(out_dir)
    for parent in (target, *target.parents):
        if parent.exists() and not parent.is_dir():
            raise BadInput(f"--out {target}: {parent} is a file, not a folder (give a folder for the model)")
    if not target.exists() or not any(target.iterdir()) or written_by_finetune(target):
        return OutputPlan(target, False)
    found = sorted(path.name for path in target.iterdir())
    shown = ", ".join(found[:SHOWN_FILES]) + (f", ... ({len(found)} entries)" if len(found) > SHOWN_FILES else "")
    if not force:
        raise OutputNotOurs(f"--out {target} holds files that are not a model written by rag-pipeline finetune "
                            f"({shown}): give a new folder, or add --force to write the model there once it is "
                            f"complete (the folder's present contents are then kept, renamed to "
                            f"{target.name}.replaced-<date>-<time>)")
    here = Path.cwd().resolve()
    if target.resolve() == here or target.resolve() in here.parents:
        raise BadInput(f"--out {target} is the current folder or one above it: --force cannot set it aside; "
                       f"give a new folder for the model")
    return OutputPlan(target, True)


def place_output(plan: OutputPlan, work: Path) -> Placed:
    """Put the complete model in `work` at `plan.target`, the user's folder renamed aside first."""
    if not plan.set_aside:
        return Placed(plan.target, None)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    aside = plan.target.with_name(f"{plan.target.name}.replaced-{stamp}")
    number = 1
    while aside.exists():
        number += 1
        aside = plan.target.with_name(f"{plan.target.name}.replaced-{stamp}-{number}")
    os.rename(plan.target, aside)
    os.rename(work, plan.target)
    return Placed(plan.target, aside)


@contextmanager
def staged_output(plan: OutputPlan, placed: list[Placed]) -> Iterator[Path]:
    """Yield the folder to train into; when the block ends without an error, the model is put in place and
    the outcome appended to `placed`; on an error a staging folder (and only that) is removed."""
    work = plan.target
    if plan.set_aside:
        work = Path(tempfile.mkdtemp(dir=plan.target.resolve().parent, prefix=f".{plan.target.name}.finetune-"))
    try:
        yield work
    except BaseException:
        if plan.set_aside:
            shutil.rmtree(work, ignore_errors=True)
        raise
    placed.append(place_output(plan, work))


__all__ = ["OutputNotOurs", "OutputPlan", "Placed", "check_output", "place_output", "staged_output",
           "written_by_finetune", "TRAINING_FILE"]
