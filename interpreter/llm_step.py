"""An ``llm:`` step inside a run: the engine's bridge to :func:`llm.run_llm_step`.

Resolves the model, narrows the tools, hands the model the output path's
alternatives when it branches, memoizes through the run's journal, charges the
run's budget and records usage. Imported only when a plan has an LLM step.
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable

from ..dsl.ir import Step
from . import llm
from .tools import Branch, Tool


async def invoke(execution: Any, step: Step, prompt: str, system: str | None) -> Any:
    call, options = step.llm, execution.options
    narrowed = {name: execution.tools[name] for name in call.tools if name in execution.tools}
    branching = step.output is not None and step.output.branching
    result = await llm.run_llm_step(
        step.id, call, prompt, system,
        model=llm.default_model(call.model, options.model),
        tools={name: _as_async(t) for name, t in narrowed.items()},
        tool_specs={name: t.spec for name, t in narrowed.items()},
        alternatives=tuple(" && ".join(map(str, alt)) for alt in step.output.alternatives) if branching else (),
        memo=execution.journal.memo_for(step.id) if execution.journal is not None else None,
        max_iterations=call.max_iterations or options.step_max_iterations,
        completion_kwargs=options.completion_kwargs,
        budget=_budget(execution),
    )
    _account(execution, step, result)
    return Branch(result.alternative, result.output) if branching else result.output


def _budget(execution: Any) -> llm.Budget:
    """The run's budget, created with its first LLM step, seeded with what replayed steps spent."""
    if execution._budget is None:
        usage, options = execution.usage, execution.options
        execution._budget = llm.Budget(options.max_cost, options.max_tokens, prompt_tokens=usage["prompt_tokens"],
                                       completion_tokens=usage["completion_tokens"], cost=usage["cost"])
    return execution._budget


def _account(execution: Any, step: Step, result: llm.LLMResult) -> None:
    execution.steps[step.id].usage = {
        "model": result.model, "prompt_tokens": result.prompt_tokens, "completion_tokens": result.completion_tokens,
        "cost": result.cost, "calls": result.calls, "replayed_calls": result.replayed,
    }
    usage = execution.usage
    usage["prompt_tokens"] += result.prompt_tokens
    usage["completion_tokens"] += result.completion_tokens
    usage["cost"] += result.cost
    usage["llm_calls"] += result.calls


def _as_async(tool: Tool) -> Callable[..., Awaitable[Any]]:
    if tool.is_async:
        return tool.fn

    async def call(**args: Any) -> Any:
        return await asyncio.to_thread(tool.fn, **args)

    return call
