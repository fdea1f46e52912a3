"""experiments/filings-finetuned.yaml (issue 42, item 4): an embedder fine-tuned on a user's labelled filings.

The recipe is the shipped filings point (experiments/filings-best.yaml) with a trained embedding model, so the
two files must not drift apart; the commands its header documents (train, then evaluate) must be valid
commands of this CLI, train on the shipped point's chunking and write the folder the recipe reads.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import yaml

from rag_core.cli import build_parser
from rag_core.config import RagConfig

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENTS = ROOT / "experiments"
RECIPE = EXPERIMENTS / "filings-finetuned.yaml"
SHIPPED = EXPERIMENTS / "filings-best.yaml"


def documented_commands(path: Path) -> list[list[str]]:
    """The `rag-pipeline ...` commands in a YAML file's comments (a trailing backslash continues a line),
    as argument lists without the program name."""
    commands: list[str] = []
    continued = False
    for line in path.read_text(encoding="utf-8").splitlines():
        text = line[1:].strip() if line.startswith("#") else ""
        if continued:
            commands[-1] += " " + text
        elif text.startswith("rag-pipeline "):
            commands.append(text)
        else:
            continue
        continued = commands[-1].endswith("\\")
        commands[-1] = commands[-1].removesuffix("\\").rstrip()
    return [shlex.split(command)[1:] for command in commands]


def test_comment_commands_are_joined_across_backslashes(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("# intro\n#   rag-pipeline eval --k 5 \\\n#     --mode bm25\n# prose\n"
                    "#   rag-pipeline query 'a b'\nk: 5\n# rag-pipeline later\n")
    assert documented_commands(path) == [["eval", "--k", "5", "--mode", "bm25"], ["query", "a b"], ["later"]]


def test_recipe_is_the_shipped_filings_point_with_a_trained_embedder_and_no_fallback():
    recipe = yaml.safe_load(RECIPE.read_text(encoding="utf-8"))
    shipped = yaml.safe_load(SHIPPED.read_text(encoding="utf-8"))
    assert {key: value for key, value in recipe.items() if key not in ("embed_model", "model_fallback")} == shipped
    assert recipe["model_fallback"] is False  # a model not trained yet is an error, never the base model quietly
    assert recipe["embed_model"] not in (None, RagConfig().embed_model)
    RagConfig.from_dict(recipe, where=str(RECIPE))  # every setting valid


def test_documented_commands_train_on_the_shipped_chunking_and_write_what_the_recipe_reads():
    recipe = yaml.safe_load(RECIPE.read_text(encoding="utf-8"))
    commands = documented_commands(RECIPE)
    assert [argv[0] for argv in commands] == ["finetune", "eval"]
    parser = build_parser()
    train, evaluate = (parser.parse_args(argv) for argv in commands)  # argparse exits (a failure) on a bad flag
    assert train.kind == "embedder"
    assert (ROOT / train.config).resolve() == SHIPPED.resolve()  # the documented commands run from the root
    assert train.out == recipe["embed_model"]
    assert (ROOT / evaluate.config).resolve() == RECIPE.resolve()
