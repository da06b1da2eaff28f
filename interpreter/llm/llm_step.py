"""The runner of ``llm:`` steps: the engine's bridge to :func:`.conversation.run_llm_step`.

Resolves the prompt and the model, narrows the run's tools to the step's, hands the
model the output path's alternatives when it branches, memoizes every call through
the run's journal, charges the run's budget and accounts the usage to the unit.
litellm itself is imported by :mod:`.llm` only when a call is made.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable

from ...dsl.ir import Step, ToolSpec
from . import conversation
from ..core.context import StepContext
from ..tools.catalog import Branch
from ..core.vocabulary import EventType


class LLMRunner:
    per_child = False

    def prepare(self, ctx: StepContext, step: Step) -> tuple[str, str | None]:
        assert step.llm is not None  # the table chose this runner because it is set
        prompt = ctx.resolve(step.llm.prompt)
        if any(not isinstance(part, str) for part in step.llm.prompt.parts):
            # where every word of the prompt came from, kept with the run (redacted part by part)
            shown, spans = ctx.provenance(step.llm.prompt)
            ctx.emit(EventType.PROMPT_RESOLVED, prompt=shown, spans=spans)
        return prompt, ctx.resolve(step.llm.system) if step.llm.system else None

    async def run(self, ctx: StepContext, step: Step, prepared: tuple[str, str | None]) -> Any:
        call, options = step.llm, ctx.options
        assert call is not None
        alternatives = step.output.alternatives if step.output is not None and step.output.branching else ()
        known = ctx.tool_specs()
        # the tools the step names; under mocks or a cassette, also those the run does not have
        specs = {n: known.get(n) or ToolSpec(n) for n in call.tools if n in known or options.calls is not None}
        result = await conversation.run_llm_step(
            ctx.unit_id,
            call,
            *prepared,
            model=conversation.default_model(call.model, options.model),
            tools={name: _caller(ctx, name) for name in specs},
            tool_specs=specs,
            alternatives=tuple(" && ".join(map(str, alt)) for alt in alternatives),
            memo=ctx.memo(),
            max_iterations=call.max_iterations or options.step_max_iterations,
            completion_kwargs=options.completion_kwargs,
            budget=ctx.budget(),
            calls=options.calls,
            on_call=lambda model, record, seconds: _called(ctx, model, record, seconds),
        )
        ctx.account(
            {
                "model": result.model,
                "prompt_tokens": result.prompt_tokens,
                "completion_tokens": result.completion_tokens,
                "cost": result.cost,
                "calls": result.calls,
                "replayed_calls": result.replayed,
            }
        )
        return Branch(result.alternative, result.output) if alternatives else result.output


def _called(ctx: StepContext, model: str, record: dict, seconds: float) -> None:
    """One model call, as an event for subscribers (a trace's span, a viewer)."""
    usage = record.get("usage") or {}
    ctx.emit(
        EventType.MODEL_CALLED,
        model=model,
        response_model=record.get("model"),
        prompt_tokens=usage.get("prompt_tokens", 0),
        completion_tokens=usage.get("completion_tokens", 0),
        cost=record.get("cost", 0.0),
        duration=seconds,
    )


def _caller(ctx: StepContext, name: str) -> Callable[..., Awaitable[Any]]:
    def call(**args: Any) -> Awaitable[Any]:
        return ctx.call_tool(name, args)

    return call
