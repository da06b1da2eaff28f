"""The bodies of :class:`dagplan.Project`'s planning methods (``aplan``, ``aagent``, ``aevaluate``): a model's plan
for a task, checked, repaired, and run when asked (streamed or whole); the agent loop; a model's plans over a task
file, scored. Each takes the project ``here`` (its configuration, tools, state); the module-level functions are
:mod:`dagplan.planning`.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Iterable, Mapping

from ._pipeline import Approve, ToolsArg, specs_of
from .dsl.ir import Plan


async def planned(
    here: Any,
    task: str,
    *,
    tools: ToolsArg = None,
    model: str | None = None,
    run: bool = False,
    stream: bool = False,
    inputs: Mapping[str, Any] | None = None,
    approve: Approve | None = None,
    durable: bool = True,
    subscribers: Iterable[Callable] = (),
    on_run_created: Callable[[str], None] | None = None,
    on_event: Callable[[Mapping[str, Any]], None] | None = None,
    ask_gate: Callable[[Mapping[str, Any]], Any] | None = None,
    completion_kwargs: Mapping[str, Any] | None = None,
    on_limit_exceeded: Callable | None = None,
    gate_acting: bool = False,
    **planner: Any,
):
    """:func:`aplan` in the project ``here`` (:meth:`Project.aplan`)."""
    from .interpreter.llm import planner as planning

    cfg = here.config
    own = tools is None or tools is here.tools  # the project's tools: a resume loads them from its sources
    tools = here.tools if tools is None else tools
    chosen = model or cfg.default_model
    kwargs = {**cfg.llm, **(completion_kwargs or {})}
    planner.setdefault("structured_output", cfg.structured_output)
    if not run:
        return await planning.aplan(task, tools=tools, model=chosen, completion_kwargs=kwargs, **planner)  # type: ignore[arg-type]
    from .interpreter.engine.scope import Options
    from .interpreter.tools.catalog import registry

    found = registry(tools)
    if not stream:
        result = await planning.aplan(task, tools={n: t.spec for n, t in found.items()}, model=chosen,
                                      completion_kwargs=kwargs, **planner)  # fmt: skip
        done = await here.arun(result.plan, tools=None if own else found, inputs=inputs, approve=approve,
                               durable=durable, subscribers=subscribers, on_run_created=on_run_created,
                               ask_gate=ask_gate, model=chosen, completion_kwargs=completion_kwargs,
                               on_limit_exceeded=on_limit_exceeded)  # fmt: skip
        from dataclasses import replace

        return replace(result, run=done)
    from .interpreter.ops.streamed import StreamRequest, plan_and_run

    options = Options.from_config(cfg, subscribers=subscribers, model=chosen, completion_kwargs=completion_kwargs,
                                  ask_gate=ask_gate, person_gates=True, gate_acting=gate_acting or None,
                                  on_limit_exceeded=on_limit_exceeded)  # fmt: skip
    on_attempt = planner.pop("on_attempt", None)
    from .interpreter.tools.sources import source_record

    sources = here.sources if own else here.tool_sources
    meta = {"tool_sources": source_record(sources), "config": str(cfg.path) if cfg.path else None}
    return await plan_and_run(
        StreamRequest(
            task,
            found,
            options,
            chosen,
            planner,
            kwargs,
            inputs=inputs,
            approve=approve,
            durable=durable,
            state=here.state,
            on_run_created=on_run_created,
            on_event=on_event,
            on_attempt=on_attempt,
            meta=meta,
        )  # fmt: skip
    )


async def agent(
    here: Any,
    task: str,
    *,
    tools: ToolsArg = None,
    model: str | None = None,
    approve: Approve | None = None,
    max_turns: int = 5,
    completion_kwargs: Mapping[str, Any] | None = None,
    on_run_created: Callable[[str], None] | None = None,
    on_turn: Callable[[Any], Any] | None = None,
):
    """:func:`aagent` in the project ``here`` (:meth:`Project.aagent`)."""
    from .interpreter.llm.agent import durable_agent_loop
    from .interpreter.tools.catalog import registry
    from .dsl.ir import can_act
    from .dsl.errors import RunError

    cfg = here.config
    found = registry(tools)
    chosen = model or cfg.default_model

    async def run_plan(batch: Plan) -> Mapping[str, Any]:
        acting = [s.id for s in batch.steps if can_act(s, found)]
        if acting:
            if approve is None:
                said = f"the agent's next steps act on the world ({', '.join(acting)})"
                raise RunError.make("approval-required", said,
                                    hint="a person approves them: dagplan agent on a terminal, or --yes")  # fmt: skip
            answer = approve(here.preview(batch, found))
            if hasattr(answer, "__await__"):
                answer = await answer
            if not answer:
                raise RunError.make("not-approved", f"the agent's next steps were not approved ({', '.join(acting)})")
        done = await here.arun(batch, tools=found, model=chosen, completion_kwargs=completion_kwargs,
                               person_gates=True)  # fmt: skip
        return done.state

    return await durable_agent_loop(task, tools={n: t.spec for n, t in found.items()}, run_plan=run_plan,
                                    model=chosen, state_dir=here.state, on_run_created=on_run_created,
                                    max_turns=max_turns, checkpoint=on_turn,
                                    completion_kwargs={**cfg.llm, **(completion_kwargs or {})})  # fmt: skip


async def evaluated(
    here: Any,
    tasks: str | os.PathLike,
    *,
    tools: ToolsArg = None,
    model: str,
    repair: int = 2,
    completion_kwargs: Mapping[str, Any] | None = None,
    on_graded: Callable[[Any], None] | None = None,
):
    """:func:`aevaluate` in the project ``here`` (:meth:`Project.aevaluate`)."""
    from .interpreter.testing.evaluate import aevaluate as evaluate, read_tasks

    from .dsl.ir import ToolSpec

    cfg = here.config
    given = dict(tools) if isinstance(tools, Mapping) else None
    specs = given if given is not None and all(isinstance(v, ToolSpec) for v in given.values()) else specs_of(tools)
    return await evaluate(read_tasks(os.fspath(tasks)), specs, model,
                          repair=repair, completion_kwargs={**cfg.llm, **(completion_kwargs or {})},
                          structured_output=cfg.structured_output, on_graded=on_graded)  # fmt: skip
