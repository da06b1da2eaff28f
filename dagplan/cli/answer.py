"""``dagplan answer RUN STEP VALUE``: answer an approval gate a run is waiting at, from any process.

The answer is recorded in the run's log (durably); ``dagplan resume RUN`` then
continues the run without re-running anything that had completed. A refusal
(``reject``, ``no``, ...) is recorded too: on resume the gate fails and the plan's
failure policy decides what happens next.
"""

from __future__ import annotations

import json
import sys

import click

from ..dsl.errors import DagplanError, RunError
from .run import fail


@click.command("answer")
@click.argument("run_id", metavar="RUN")
@click.argument("step", metavar="STEP")
@click.argument("value", metavar="VALUE")
@click.option("--state-dir", type=click.Path(file_okay=False), default=None,
              help="Where runs are checkpointed (default: $DAGPLAN_STATE_DIR or ./.dagplan).")
def answer(run_id: str, step: str, value: str, state_dir: str | None) -> None:
    """Answer the approval gate STEP of RUN with VALUE (one of its choices, or JSON for a schema)."""
    from ..interpreter.compose import answer_problem, record_answer, waiting_requests
    from ..interpreter.config import load_config
    from ..interpreter.store import RunStore

    try:
        store = RunStore(state_dir or load_config().state_dir)
        run = store.open(run_id)
        request = _request(run, step, waiting_requests(run))
        answer_value = _parse(value, request)
        problem = answer_problem(request, answer_value)
        if problem:
            raise RunError.make("bad-answer", f"step {step}: {problem}", hint=_choices_hint(request))
        run.acquire()
        try:
            record_answer(run, step, answer_value)
        finally:
            run.release()
    except DagplanError as exc:
        fail(exc)
    click.echo(f"recorded the answer of {step}; continue with: dagplan resume {run.id}", err=True)
    sys.exit(0)


def _request(run, step: str, waiting: list[dict]) -> dict:
    if run.progress().status != "waiting" or not waiting:
        raise RunError.make("not-waiting", f"run {run.id} is not waiting for an answer",
                            hint="dagplan runs shows each run's status")
    for request in waiting:
        if request.get("step") == step:
            return request
    names = ", ".join(r.get("step", "?") for r in waiting)
    raise RunError.make("unknown-step", f"run {run.id} is not waiting at {step!r}", hint=f"it waits at: {names}")


def _parse(value: str, request: dict):
    if request.get("choices"):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def _choices_hint(request: dict) -> str | None:
    if request.get("choices"):
        return "answer one of: " + ", ".join(request["choices"])
    if request.get("schema"):
        return "the answer must match: " + json.dumps(request["schema"])
    return None
