# Two commands for a fresh machine: `make demo` (the main job on the sample corpus) and `make test`.
# Both create .venv if it is missing and install the project into it.
#
# torch is installed first, pinned to a CPU build, so that pip never pulls a multi-GB CUDA build.
# Models come from the Hugging Face hub unless HF_HUB_OFFLINE=1 (the default here, where the hub is
# unreachable: the packaged all-MiniLM-L6-v2 then stands in, announced). With hub access:
#   make demo HF_HUB_OFFLINE=0

PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false
export TRANSFORMERS_VERBOSITY ?= error

.PHONY: demo test test-fast test-servers install sample-corpus lab mlflow-ui ui-check benchmarks clean-store team-services team-services-stop docs

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH_SPEC)"
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m rag_core.demo

test: $(STAMP)
	$(BIN)/python -m pytest -q

# The inner loop: tests/unit (no models, no servers, no notebooks; about a minute).
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q tests/unit

# Everything but the slow tier: adds the servers (Chroma, MLflow, PostgreSQL, Ray, the local LLM API)
# and the CLI in subprocesses; leaves out models and notebooks (tests marked slow).
test-servers: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow"

sample-corpus: $(STAMP)
	$(BIN)/python scripts/build_sample_corpus.py

lab: $(STAMP)
	$(BIN)/python -m pip install --quiet -e ".[notebook]"
	$(BIN)/jupyter lab notebooks/ $(if $(filter 0,$(shell id -u)),--allow-root)  # jupyter refuses root without it

mlflow-ui: $(STAMP)
	@echo "MLflow UI: http://127.0.0.1:5000 - pick 'Model training' (top left, remembered) to open experiments on their runs;"
	@echo "an evaluation prints its runs view's address (runs first, the workbench's columns)."
	$(BIN)/mlflow ui --backend-store-uri sqlite:///mlruns/mlflow.db --default-artifact-root ./mlruns/artifacts --host 127.0.0.1 --port 5000

# Headless Chromium loads the MLflow UI (a run, its traces) and JupyterLab (notebooks/01-explore.ipynb).
ui-check: $(STAMP)
	$(BIN)/python scripts/ui_check.py

benchmarks: $(STAMP)
	$(BIN)/python benchmarks/retrieval.py
	$(BIN)/python benchmarks/rerank_backends.py
	$(BIN)/python benchmarks/startup.py
	$(BIN)/python benchmarks/sweep.py
	$(BIN)/python benchmarks/tracing.py
	$(BIN)/python benchmarks/vector_stores.py

# The documentation site (mkdocs.yml; pages in docs/) into site/. --strict: a broken link or anchor, or a
# page missing from the nav, fails the build. Needs only MkDocs (the `docs` extra), not the project's install.
MKDOCS_SPEC ?= mkdocs>=1.6,<2
docs:
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -c "import mkdocs" 2>/dev/null || $(BIN)/python -m pip install --quiet "$(MKDOCS_SPEC)"
	$(BIN)/python -m mkdocs build --strict --site-dir site

# PostgreSQL + MLflow server + Chroma server on 127.0.0.1 (data in .team/), for trying the "scaling out" setup
team-services: $(STAMP)
	BIN=$(BIN) scripts/team_services.sh start

team-services-stop:
	BIN=$(BIN) scripts/team_services.sh stop

clean-store:
	rm -rf .rag_store
