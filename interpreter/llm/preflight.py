"""Preflight: what can be known before the first step runs, checked before it runs.

A plan that passes ``check`` must not fail at its fifth step for a reason visible at the
start: an LLM step with no model to call, ``litellm`` not installed, the provider's API key
missing. :func:`preflight` looks at every LLM step (inside sub-plans and loops too) and
raises one :class:`RunError` listing all of it, so nothing with a side effect has run yet.
"""

from __future__ import annotations

import importlib.util
from ...dsl.record import replace
from typing import Any, Iterator, Mapping, Sequence

from ...dsl.errors import NOSPAN, Diagnostic, RunError, error
from ...dsl.ir import Plan, Step
from ..core.config import MODEL_ORDER, chosen_model


def plan_steps(plan: Plan) -> tuple[Step, ...]:
    """Every step of a plan and of the plans it runs (sub-plans, loops' bodies): :func:`~dsl.ir.walk`'s."""
    return plan.all_steps


def llm_steps(plan: Plan) -> tuple[Step, ...]:
    """Every LLM step of a plan and of the plans it runs."""
    return plan.llm_steps


def check_warnings(plan: Plan, model: str | None) -> list[Diagnostic]:
    """What ``check`` can know of the preflight without importing litellm: LLM steps with no model,
    litellm not installed. Warnings: the run may yet be given ``--model``."""
    found = [d for d in _problems(plan, model, {"api_base": "skip the credentials"}) if d.code != "no-credentials"]
    return [replace(d, severity="warning") for d in found]


def preflight(plan: Plan, model: str | None, completion_kwargs: Mapping[str, Any]) -> None:
    """Raise RunError ``preflight`` when an LLM step could not run, whatever happens before it."""
    problems = list(_problems(plan, model, completion_kwargs))
    if problems:
        raise RunError(problems)


def _problems(plan: Plan, model: str | None, completion_kwargs: Mapping[str, Any]) -> Iterator[Diagnostic]:
    steps = list(llm_steps(plan))
    if not steps:
        return
    default = chosen_model(given=model)
    models: dict[str, Step] = {}
    for step in steps:
        assert step.llm is not None
        chosen = step.llm.model or default
        if not chosen:
            yield error(
                "no-model",
                f"LLM step '{step.id}' has no model to call",
                step.span,
                MODEL_ORDER,
            )
        else:
            models.setdefault(chosen, step)
    yield from model_problems(models, completion_kwargs, [s.id for s in steps])


def model_problems(
    models: Mapping[str, Step | None], completion_kwargs: Mapping[str, Any], step_ids: Sequence[str] = ()
) -> Iterator[Diagnostic]:
    """What would stop these models from being called, known before any call: the local model's packages,
    litellm, the provider's key. ``models`` maps a model to the step that first calls it (None: the planner)."""
    from .local import is_local, missing

    models = dict(models)
    for model in [m for m in models if is_local(m)]:  # the bundled model: its packages, no key, no litellm
        step = models.pop(model)
        problem = missing() if model == "local" else None
        if problem:
            yield error("no-llm-support", f"{_who(step)}: {problem}", step.span if step else NOSPAN,
                        "or pass --model with a hosted or served model")  # fmt: skip
    if not models:
        return
    if importlib.util.find_spec("litellm") is None:
        needs = f"the plan has LLM steps ({', '.join(step_ids)})" if step_ids else "the planner needs a model"
        yield error("no-llm-support", f"{needs} but litellm is not installed",
                    hint="install dagplan[llm]: pip install 'dagplan[llm]'")  # fmt: skip
        return
    if completion_kwargs.get("api_key") or completion_kwargs.get("api_base"):
        return  # the caller points at its own endpoint and key: litellm's environment check does not apply
    yield from _credentials(models)


def _who(step: Step | None, kind: str = "LLM step") -> str:
    return f"{kind} '{step.id}'" if step is not None else "the planner"


def _credentials(models: Mapping[str, Step | None]) -> Iterator[Diagnostic]:
    from .conversation import litellm_module

    litellm = litellm_module()  # imported the one way: its offline price map, no telemetry

    for model, step in models.items():
        try:
            found = litellm.validate_environment(model=model)
        except Exception:  # noqa: BLE001 - a model litellm cannot judge: the call will say
            continue
        missing = list(found.get("missing_keys") or ()) if isinstance(found, Mapping) else []
        if missing and not found.get("keys_in_environment", False):
            yield error(
                "no-credentials",
                f"model '{model}' ({_who(step, 'step')}) needs {', '.join(missing)} in the environment",
                step.span if step is not None else NOSPAN,
                f"export {missing[0]}=... before running (nothing has run yet)",
            )
