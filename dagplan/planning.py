"""Plans a model writes: ``plan`` / ``aplan`` (a model's plan for a task, checked, repaired, and run when
asked, streamed or whole), the agent loop (``aagent``), and ``evaluate`` (a model's plans over a task file,
scored). Each takes the project's context as :mod:`dagplan.api` does, and runs through its ``arun``.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Iterable, Mapping

from ._pipeline import Approve, ToolsArg, sync as _sync
from .api import _here


async def aplan(
    task: str,
    *,
    tools: ToolsArg = None,
    model: str | None = None,
    run: bool = False,
    stream: bool = False,
    inputs: Mapping[str, Any] | None = None,
    approve: Approve | None = None,
    durable: bool = True,
    state_dir: Any = None,
    config: Any = None,
    subscribers: Iterable[Callable] = (),
    on_run_created: Callable[[str], None] | None = None,
    on_event: Callable[[Mapping[str, Any]], None] | None = None,
    ask_gate: Callable[[Mapping[str, Any]], Any] | None = None,
    completion_kwargs: Mapping[str, Any] | None = None,
    on_limit_exceeded: Callable | None = None,
    tool_sources: Iterable[str] = (),
    gate_acting: bool = False,
    **planner: Any,
):
    """A model's plan for ``task`` using only ``tools`` (validated, repaired): a :class:`PlanResult`.

    ``run=True`` also runs it (``result.run`` is the :class:`RunResult`; ``approve(preview)`` is asked for
    the whole plan first when given, as ``dagplan plan --run`` asks a person). ``stream=True`` (with
    ``run``): the plan is read as the model writes it, and each ``pure`` / ``idempotent`` tool step whose
    text is complete and checked starts at once; a side effect, a gate, a model step and what follows them
    wait for the whole plan to pass check and be approved (``interpreter/ops/streamed.py``); ``tool_sources``
    (the files or modules the tools came from) are recorded, so ``resume`` loads the same; ``gate_acting``
    (streamed; recorded with the run) puts a person's gate before the steps that act. ``on_event``
    sees the streaming: ``started_early``, ``early_done``, ``prefix_failed``, ``plan_complete``. Other
    keywords go to the planner (``repair``, ``guide``, ``structured_output``, ``on_attempt``...)."""
    return await _here(config, state_dir, tool_sources).aplan(
        task, tools=tools, model=model, run=run, stream=stream, inputs=inputs, approve=approve, durable=durable,
        subscribers=subscribers, on_run_created=on_run_created, on_event=on_event, ask_gate=ask_gate,
        completion_kwargs=completion_kwargs, on_limit_exceeded=on_limit_exceeded, gate_acting=gate_acting, **planner,
    )  # fmt: skip


async def aagent(
    task: str,
    *,
    tools: ToolsArg = None,
    state_dir: Any = None,
    config: Any = None,
    **options: Any,
):
    """The agent loop on ``task`` (``dagplan agent``): the model plans, a batch runs, the model re-plans from
    the live state, until it answers; a durable run (each model call memoized, each turn logged). A batch
    that can act on the world runs only once ``approve(preview)`` said yes (a person; without ``approve``
    such a batch is refused): the model never approves its own side effects. Every gate is a person's."""
    return await _here(config, state_dir).aagent(task, tools=tools, **options)


def plan(task: str, **kwargs: Any):
    """Sync twin of :func:`aplan`."""
    return _sync(aplan(task, **kwargs))


async def aevaluate(tasks: str | os.PathLike, *, config: Any = None, **options: Any):
    """``dagplan eval``: plan every task of a task file with ``model`` over ``tools`` (tools, or their
    :class:`ToolSpec`: a catalog needs no code) and score the plans
    (node and edge F1, argument values, runs to the end with the tools faked; misses by kind). Returns a
    :class:`~dagplan.interpreter.testing.evaluate.Report`."""
    return await _here(config).aevaluate(tasks, **options)


def evaluate(tasks: str | os.PathLike, **kwargs: Any):
    """See :func:`aevaluate`."""
    return _sync(aevaluate(tasks, **kwargs))
