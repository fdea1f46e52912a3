"""A review queue of an experiment's traced questions, in MLflow (``rag-pipeline feedback queue``).

MLflow 3.17 keeps label schemas (``mlflow.genai.label_schemas``: a question with a fixed input, scoped to
an experiment) and review queues (``mlflow.genai.review_queues``: traces attached to a named queue that
asks a chosen set of schemas) in the tracking store itself, the SQLite one included; the UI shows a
queue under the experiment's "Review" tab, and an answer given there is an MLflow assessment named
after its schema on the trace. This module creates, idempotently:

- the schemas of ``rag_core.evaluate.queue_labels.QUESTIONS`` (an existing schema of that name is kept;
  ``passage_relevant``'s choices grow to the most passages a queued trace holds, never shrink);
- a custom queue (default ``rag-review``) asking those three, and attaches the chosen traces (attaching
  a trace twice keeps its status).

A deleted experiment is refused (bad input naming how to restore it), as ``query --trace`` refuses it: its
traces are hidden and ``mlflow gc`` would remove them with the queue.
Which traces (``since``, unlabelled only, a sample) is ``queue_labels.select_traces``; reading a queue's
answers back is ``rag_core.workbench.tracking.labels`` (the same path as every label).
Left out: assigning reviewers (any user of the UI may answer), deleting queues, Databricks review apps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from rag_core.errors import BadInput
from rag_core.evaluate.queue_labels import ACCEPTED, QUESTIONS, REJECTED, QueueQuestion, passage_choices, select_traces
from rag_core.workbench.tracking.labels import labelled_traces
from rag_core.workbench.tracking.tracker import Tracker, global_tracking_uri, tracking_errors

if TYPE_CHECKING:
    from mlflow.genai.label_schemas import LabelSchema

DEFAULT_QUEUE = "rag-review"


@dataclass(frozen=True)
class QueueReport:
    experiment: str
    experiment_id: str
    queue: str
    queue_id: str
    schemas: dict[str, str]  # name -> schema id
    created: list[str]  # what this call created: schema names, "queue"
    choices: list[str]  # passage_relevant's choices
    traces: int  # the experiment's traces
    added: list[str]  # trace ids attached now
    already: int  # chosen traces that were attached before
    tracking_uri: str

    def ui_path(self) -> str:
        """Where the UI shows the queue, after its address: ``#/experiments/<id>/review-queue``."""
        return f"#/experiments/{self.experiment_id}/review-queue"

    def as_json(self) -> dict[str, Any]:
        return {"experiment": self.experiment, "experiment_id": self.experiment_id, "queue": self.queue,
                "queue_id": self.queue_id, "schemas": self.schemas, "created": self.created, "choices": self.choices,
                "traces": self.traces, "added": self.added, "already": self.already,
                "tracking_uri": self.tracking_uri, "ui_path": self.ui_path()}



def build_review_queue(experiment: str, *, queue: str = DEFAULT_QUEUE, since_ms: int | None = None,
                       unlabelled_only: bool = False, sample: int | None = None, seed: int = 0,
                       tracking_uri: str | None = None) -> QueueReport:
    """Create (or reuse) the label schemas and queue `queue` of `experiment` and attach its chosen traces."""
    Tracker.at(tracking_uri, off_switch="").check(experiment)  # a deleted one: BadInput naming how to restore it
    traces = labelled_traces(experiment, tracking_uri)  # BadInput for an unknown experiment
    chosen = select_traces(traces, since_ms=since_ms, unlabelled_only=unlabelled_only, sample=sample, seed=seed)
    tracker = Tracker.at(tracking_uri)
    with tracking_errors(tracker.uri), global_tracking_uri(tracker.uri):
        experiment_id = tracker.client.get_experiment_by_name(experiment).experiment_id
        choices = passage_choices(chosen or traces)
        schemas, created = ensure_label_schemas(experiment_id, choices)
        found, queue_created = _queue(experiment_id, queue, [schemas[q.name].schema_id for q in QUESTIONS])
        attached = _attached(found.queue_id)
        wanted = [trace.trace_id for trace in chosen]
        added = [trace_id for trace_id in wanted if trace_id not in attached]
        if added:
            from mlflow.genai.review_queues import add_items_to_review_queue

            add_items_to_review_queue(found.queue_id, item_ids=added)
    return QueueReport(experiment, experiment_id, queue, found.queue_id,
                       {name: schema.schema_id for name, schema in schemas.items()},
                       created + (["queue"] if queue_created else []), choices, len(traces), added,
                       len(wanted) - len(added), tracker.uri)


def ensure_label_schemas(experiment_id: str, choices: Sequence[str]) -> tuple[dict[str, "LabelSchema"], list[str]]:
    """The schemas of ``QUESTIONS`` in `experiment_id` (name -> schema), creating those missing; and the
    names created. ``passage_relevant`` gets `choices` added to those it has."""
    from mlflow.genai.label_schemas import create_label_schema, list_label_schemas, update_label_schema

    existing = {schema.name: schema for schema in _all_schemas(experiment_id, list_label_schemas)}
    schemas, created = {}, []
    for question in QUESTIONS:
        schema = existing.get(question.name)
        if schema is None:
            schema = create_label_schema(question.name, type=question.kind, input=_input(question, choices),
                                         instruction=question.instruction, enable_comment=True,
                                         experiment_id=experiment_id)
            created.append(question.name)
        elif question.input == "choices":
            schema = _grown_choices(schema, choices, update_label_schema)
        schemas[question.name] = schema
    return schemas, created


def _input(question: QueueQuestion, choices: Sequence[str]) -> Any:
    from mlflow.genai.label_schemas import InputCategorical, InputPassFail, InputText

    if question.input == "pass_fail":
        return InputPassFail(positive_label=ACCEPTED, negative_label=REJECTED)
    if question.input == "text":
        return InputText()
    return InputCategorical(options=list(choices), multi_select=True)


def _grown_choices(schema: "LabelSchema", choices: Sequence[str], update: Any) -> "LabelSchema":
    """An existing choices schema, with `choices` it lacks appended (a schema made by hand stays as it is
    unless it is a multi-select of choices)."""
    from mlflow.genai.label_schemas import InputCategorical

    options = list(getattr(schema.input, "options", []) or [])
    if not isinstance(schema.input, InputCategorical) or not schema.input.multi_select:
        raise BadInput(f"label schema {schema.name!r} of experiment {schema.experiment_id} is not a multi-select of "
                       "passages (made by hand?); delete it in the UI's Review tab and run `feedback queue` again")
    missing = [choice for choice in choices if choice not in options]
    if not missing:
        return schema
    return update(schema.schema_id, input=InputCategorical(options=options + missing, multi_select=True))


def _all_schemas(experiment_id: str, list_schemas: Any) -> list["LabelSchema"]:
    found, token = [], None
    while True:
        page = list_schemas(experiment_id, max_results=100, page_token=token)
        found.extend(page)
        token = page.token
        if not token:
            return found


def _queue(experiment_id: str, name: str, schema_ids: list[str]) -> tuple[Any, bool]:
    """The custom queue `name`, created with `schema_ids` when missing; (queue, created)."""
    from mlflow.exceptions import MlflowException
    from mlflow.genai.review_queues import create_review_queue, get_review_queue

    try:
        found = get_review_queue(name=name, experiment_id=experiment_id)
    except MlflowException as exc:
        if exc.error_code != "RESOURCE_DOES_NOT_EXIST":
            raise
        return create_review_queue(name, queue_type="custom", schema_ids=schema_ids,
                                   experiment_id=experiment_id), True
    missing = set(schema_ids) - set(found.schema_ids)
    if found.queue_type != "custom" or missing:
        raise BadInput(f"review queue {name!r} of experiment {experiment_id} exists but does not ask "
                       f"{', '.join(q.name for q in QUESTIONS)}; name another with --queue")
    return found, False


def _attached(queue_id: str) -> set[str]:
    from mlflow.genai.review_queues import list_review_queue_items

    attached, token = set(), None
    while True:
        page = list_review_queue_items(queue_id, max_results=100, page_token=token)
        attached.update(item.item_id for item in page)
        token = page.token
        if not token:
            return attached
