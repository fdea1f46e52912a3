"""Golden sets as MLflow evaluation datasets (rag_core.workbench.tracking.golden_datasets, `rag-pipeline golden`):
JSONL -> MLflow -> JSONL gives the same bytes, every write is a new numbered version, and an evaluation of
`--golden mlflow:NAME@VERSION` records the dataset and the version as its run's dataset input."""

from __future__ import annotations

import json

import pytest
from mlflow.tracking import MlflowClient
from sweep_fixtures import tracking_uri  # noqa: F401 - fixture

from rag_core.cli import main as cli_main
from rag_core.errors import BadInput
from rag_core.evaluate.golden_records import DatasetRef, dataset_record, golden_line, parse_dataset_ref
from rag_core.paths import SAMPLE_GOLDEN_FILE
from rag_core.workbench.tracking.tracker import global_tracking_uri

# keys in an unusual order, a provenance (a trace), an extra key, a filter, non-ASCII text, an explicit null answer
ODD_LINES = [
    {"query": "Où est la clé?", "id": "x1", "evidence": [{"text": "la clé", "source": "a.pdf", "page": 2}],
     "answer": None, "note": {"b": 1, "a": [1.5, "z"]}, "filter": {"year": 2018}},
    {"id": "fb-1", "query": "What is QS-4021?", "answer": "Suspended.",
     "evidence": [{"source": "b.pdf", "page": 1, "text": "QS-4021 means suspended"}],
     "provenance": {"trace_id": "tr-abc", "experiment": "queries", "labelled_by": ["alice"],
                    "labelled_at": "2026-12-04T20:00:00+00:00"}},
]


def golden(capsys, *args: str) -> tuple[int, dict]:
    code = cli_main(["golden", *args, "--json"])
    captured = capsys.readouterr()
    return code, (json.loads(captured.out) if code == 0 else {"err": captured.err})


def test_a_line_and_its_record_convert_both_ways_in_key_order():
    for position, line in enumerate(ODD_LINES):
        record = dataset_record(line, position)
        back = golden_line(record["inputs"], record["expectations"], record["tags"])
        assert json.dumps(back, ensure_ascii=False) == json.dumps(line, ensure_ascii=False)
    record = dataset_record(ODD_LINES[1], 1)
    assert record["inputs"] == {"query": "What is QS-4021?", "query_id": "fb-1"}
    assert record["expectations"]["expected_response"] == "Suspended."  # the name MLflow's judges read
    assert record["source"] == {"source_type": "TRACE", "source_data": {"trace_id": "tr-abc"}}


@pytest.mark.parametrize("text, ref", [("mlflow:golden", DatasetRef("golden", None)),
                                       ("mlflow:golden@3", DatasetRef("golden", 3)),
                                       ("mlflow:my set@v12", DatasetRef("my set", 12))])
def test_dataset_refs(text, ref):
    assert parse_dataset_ref(text) == ref and str(ref).startswith("mlflow:")


@pytest.mark.parametrize("text", ["mlflow:", "mlflow:golden@0", "mlflow:@2", "golden@2"])
def test_bad_dataset_refs_are_bad_input(text):
    with pytest.raises(BadInput, match="mlflow:NAME@VERSION"):
        parse_dataset_ref(text)


def test_jsonl_to_mlflow_to_jsonl_is_identical_and_writes_are_versions(tracking_uri, tmp_path, capsys):  # noqa: F811
    code, first = golden(capsys, "import", str(SAMPLE_GOLDEN_FILE), "--name", "sample")
    assert (code, first["version"], first["lines"], first["added"]) == (0, 1, 36, 36)
    out = tmp_path / "back.jsonl"
    code, exported = golden(capsys, "export", "mlflow:sample", "--out", str(out))
    assert (code, exported["ref"]) == (0, "mlflow:sample@1")
    assert out.read_bytes() == SAMPLE_GOLDEN_FILE.read_bytes()

    odd = tmp_path / "odd.jsonl"
    odd.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in ODD_LINES), encoding="utf-8")
    code, second = golden(capsys, "import", str(odd), "--name", "sample", "--append")
    assert (code, second["version"], second["lines"], second["added"]) == (0, 2, 38, 2)
    code, listed = golden(capsys, "versions", "sample")
    assert [(item["version"], item["lines"]) for item in listed["versions"]] == [(1, 36), (2, 38)]
    both = tmp_path / "both.jsonl"
    assert golden(capsys, "export", "mlflow:sample@2", "--out", str(both))[0] == 0
    assert both.read_bytes() == SAMPLE_GOLDEN_FILE.read_bytes() + odd.read_bytes()
    again = tmp_path / "again.jsonl"
    assert golden(capsys, "export", "mlflow:sample@1", "--out", str(again))[0] == 0  # version 1 is unchanged
    assert again.read_bytes() == SAMPLE_GOLDEN_FILE.read_bytes()

    code, refused = golden(capsys, "export", "mlflow:sample@3", "--out", str(tmp_path / "none.jsonl"))
    assert code == 2 and "has no version 3; versions: 1, 2" in refused["err"]
    code, refused = golden(capsys, "export", "mlflow:sample", "--out", str(out))
    assert code == 2 and "exists" in refused["err"] and out.read_bytes() == SAMPLE_GOLDEN_FILE.read_bytes()


def test_an_evaluation_records_the_dataset_version_it_used(sample_store, tracking_uri, capsys):  # noqa: F811
    assert golden(capsys, "import", str(SAMPLE_GOLDEN_FILE), "--name", "golden")[0] == 0
    assert golden(capsys, "import", str(SAMPLE_GOLDEN_FILE), "--name", "golden")[0] == 0  # version 2, same lines
    code = cli_main(["eval", "--golden", "mlflow:golden@1", "--store", str(sample_store), "--rerank-depth", "0",
                     "--max-queries", "3", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and len(report["per_query"]) == 3
    assert report["mlflow"]["tracking_uri"] == tracking_uri, report["mlflow"]
    client = MlflowClient(tracking_uri)
    run = client.get_run(report["mlflow"]["run_id"])
    [used] = run.inputs.dataset_inputs
    tags = {tag.key: tag.value for tag in used.tags}
    found = client.search_datasets(filter_string="name = 'golden'")
    [version_1] = [dataset for dataset in found if dataset.tags["rag.golden.version"] == "1"]
    assert (used.dataset.name, tags["rag.golden.version"], tags["mlflow.data.context"]) == ("golden@v1", "1",
                                                                                           "evaluation")
    assert json.loads(used.dataset.source)["dataset_id"] == version_1.dataset_id
    assert used.dataset.source_type == "mlflow_evaluation_dataset"
    assert report["mlflow"]["experiment"].endswith("| golden")  # one experiment for every version of the set
    experiment_id = client.get_experiment_by_name(report["mlflow"]["experiment"]).experiment_id
    with global_tracking_uri(tracking_uri):  # a dataset reads its experiments through MLflow's global URI
        linked = client.get_dataset(version_1.dataset_id).experiment_ids
    assert experiment_id in linked  # in its Datasets tab


def test_an_unknown_dataset_is_bad_input(sample_store, tracking_uri, capsys):  # noqa: F811
    code = cli_main(["eval", "--golden", "mlflow:nobody", "--store", str(sample_store), "--no-mlflow"])
    assert code == 2 and "no golden dataset 'nobody'" in capsys.readouterr().err


def test_a_sweep_pins_the_newest_version_and_its_points_read_it(sample_store, tracking_uri, tmp_path,  # noqa: F811
                                                                 capsys):
    from rag_core.cli.sweep import with_golden
    from rag_core.paths import SAMPLE_DOCUMENTS_DIR
    from rag_core.workbench.execution.evaluation import load_notebook_inputs
    from rag_core.workbench.plans.sweep_file import load_sweep, path_str

    sweep_file = tmp_path / "sweep.yaml"
    sweep_file.write_text(f"name: pinned\ninput: {SAMPLE_DOCUMENTS_DIR}\ngolden: mlflow:golden\ngrid:\n  k: [5]\n")
    spec = load_sweep(sweep_file)
    assert path_str(spec.golden) == "mlflow:golden"  # not a path next to the sweep file
    for _ in range(2):
        assert golden(capsys, "import", str(SAMPLE_GOLDEN_FILE), "--name", "golden")[0] == 0
    pinned = with_golden(spec, None)
    assert path_str(pinned.golden) == "mlflow:golden@2" and with_golden(spec, "mlflow:golden@1").golden.name == \
        "mlflow:golden@1"
    inputs, _ = load_notebook_inputs(golden=path_str(pinned.golden), store=str(sample_store))  # what a point reads
    assert (inputs.golden_dataset.version, inputs.golden_name, len(inputs.queries)) == (2, "golden", 36)
