"""``dagplan answer RUN STEP VALUE``: answer an approval gate a run is waiting at, from any process.

The answer is recorded in the run's log (durably); ``dagplan resume RUN`` then
continues the run without re-running anything that had completed. A refusal
(``reject``, ``no``, ...) is recorded too: on resume the gate fails and the plan's
failure policy decides what happens next.
"""

from __future__ import annotations


import click

from .. import DagplanError
from .common import EXIT_OK, fail, finish, project_of, state_dir_option


@click.command("answer")
@click.argument("run_id", metavar="RUN")
@click.argument("step", metavar="STEP")
@click.argument("value", metavar="VALUE")
@state_dir_option
def answer(run_id: str, step: str, value: str, state_dir: str | None) -> None:
    """Answer the approval gate STEP of RUN with VALUE (one of its choices, or JSON for a schema)."""
    from .. import _doors

    project = project_of(state_dir)
    try:
        live = project.asked_at_terminal(run_id)  # a run asking a person now takes the answer itself
        full_id = project.answer(run_id, step, value, text=True)
    except DagplanError as exc:
        fail(exc)
    if live and any(_doors.matches(step, unit) for unit in live):
        click.echo(f"answered {step}: run {full_id}, asking at a terminal, takes the answer and goes on", err=True)
    elif _doors.is_database(project.state):  # the answer queued the run: any worker goes on with it
        click.echo(f"recorded the answer of {step}; the next `dagplan worker` continues run {full_id} "
                   f"(or here: dagplan resume {full_id})", err=True)  # fmt: skip
    else:
        click.echo(f"recorded the answer of {step}; continue with: dagplan resume {full_id}", err=True)
    finish(EXIT_OK)
