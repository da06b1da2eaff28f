"""Step fingerprints, and results taken from earlier runs by them (``run --reuse RUN``, streamed plans).

A step's fingerprint covers what determines its result: its definition (:func:`dsl.diff.step_view`, every
field but its id and position), the values it read (its resolved arguments or prompt), the fingerprints of
the steps it depends on, the tool's identity (:attr:`Tool.identity`: a version it declares, an MCP tool's
lock entry, else its source's hash) and, for a model step, the model and the parameters that change an
answer. It is recorded with each completion. A run given a :class:`Reuse` takes the result of a completed
unit with an equal fingerprint instead of calling anything; a different input, tool, model or upstream
makes a different fingerprint, so a reused result is never another input's result. Tool and model steps
are reused, and so is each item of a fan-out of them (by its own fingerprint: what the item reads, not the
whole list); compositions (fan-outs, sub-plans, loops) and gates run, and their children decide.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from ...dsl.ir import Plan, Step, StepKind
from ..core.digest import canonical, digest
from ..core.vocabulary import EARLY, EventType, StepStatus
from .resume import Recorded

# What cannot change a model's answer, left out of its identity: where it is and how it is reached (keys,
# addresses, headers, time limits, retries, logging). Every other setting may change an answer and is kept
# (max_completion_tokens, reasoning_effort, tool_choice, logit_bias, min_p, extra_body...), so a setting
# nobody listed re-runs the step rather than reusing a stale answer.
NOT_ANSWER_PARAMS = frozenset({
    "api_key", "api_base", "base_url", "api_version", "organization", "headers", "extra_headers", "timeout",
    "stream_timeout", "num_retries", "max_retries", "retry_strategy", "fallbacks", "metadata", "user",
    "aws_access_key_id", "aws_secret_access_key", "aws_session_token", "aws_region_name", "vertex_project",
    "vertex_location", "vertex_credentials", "azure_ad_token", "custom_llm_provider", "mock_response", "caching",
    "stream", "stream_options", "logger_fn", "verbose", "drop_params",
})  # fmt: skip
REUSED_KINDS = (StepKind.TOOL, StepKind.LLM)


def reusable(step: Step) -> bool:
    """Whether a step's result can be taken by fingerprint: a tool or model step, not a fan-out."""
    return step.kind in REUSED_KINDS and step.for_each is None


def reusable_item(step: Step) -> bool:
    """Whether a fan-out's items can be taken by fingerprint, each on its own: items of a tool or model step
    (a list that grew by one item runs that item; the others are taken)."""
    return step.kind in REUSED_KINDS and step.for_each is not None


def definition(step: Step) -> str:
    """A step's definition as its fingerprint holds it: every field but its id, position and description."""
    from ...dsl.diff import step_view

    view = step_view(step)
    view.pop("description", None)  # what a person reads, not what it does
    return canonical(view)


def definition_of(plan: Plan, step: Step) -> str:
    """A step's :func:`definition`, computed once per plan and carried by it (as its analysis is): the runs of
    one loaded plan, and a worker's runs of one stored plan, share it."""
    found = vars(plan).setdefault("_definitions", {})
    defined = found.get(step.id)
    if defined is None:
        defined = found[step.id] = definition(step)
    return defined


def fingerprint(defined: str, read: Any, upstream: Iterable[str | None], tool: str | None, model: Any = None) -> str:
    """The fingerprint of one step's work (see the module doc): ``defined`` its :func:`definition`, ``read``
    what it resolved (arguments, or prompt and system), ``upstream`` its dependencies' fingerprints, ``tool``
    the tool's identity, ``model`` the model and answer parameters of a model step."""
    return "fp:" + digest([defined, read, sorted(u or "" for u in upstream), tool, model])[:32]


def model_identity(model: str | None, completion_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The model and every setting that may change its answer (never a key, an address or a header: see
    :data:`NOT_ANSWER_PARAMS`; nor anything named like a credential)."""
    from ..core.redact import SECRET_KEY

    kept = {k: v for k, v in completion_kwargs.items() if k not in NOT_ANSWER_PARAMS and not SECRET_KEY.search(k)}
    return {"model": model, **dict(sorted(kept.items()))}


@dataclass(frozen=True)
class Found:
    """A completed unit of another run, reusable by its fingerprint."""

    source: str  # the run it came from (or "stream": started while the plan was being written)
    unit: str
    recorded: Recorded


class Reuse:
    """Completed results by fingerprint, from earlier runs' journals (or a streamed plan's early steps)."""

    def __init__(self, found: Mapping[str, Found] | None = None):
        self.found: dict[str, Found] = dict(found or {})

    def get(self, fp: str) -> Found | None:
        return self.found.get(fp)

    def __len__(self) -> int:
        return len(self.found)

    def add(self, fp: str, source: str, unit: str, recorded: Recorded) -> None:
        self.found.setdefault(fp, Found(source, unit, recorded))

    @classmethod
    def of(cls, journals: Iterable[Any]) -> "Reuse":
        """Every completed unit with a fingerprint in these runs (the first run given wins a fingerprint)."""
        reuse = cls()
        for journal in journals:
            progress = journal.progress()
            for event in journal.events([EventType.STEP_COMPLETED]):
                fp = event.data.get("fingerprint")
                found = progress.steps.get(event.step or "")
                if not fp or found is None or found.status is not StepStatus.COMPLETED:
                    continue
                recorded = Recorded(found.status, found.output, found.attempts, found.alternative, None,
                                    found.fields.get("usage"))  # fmt: skip
                # a result this run took from another keeps naming where it was made
                reuse.add(fp, event.data.get("reused") or journal.id, event.data.get("reused_unit") or event.step or "",
                          recorded)  # fmt: skip
            for event in journal.events([EventType.MEMO]):  # results of steps started early (a streamed run)
                key = event.data.get("key") or ""
                if key.startswith("fp:"):
                    hit, value = journal.memo_get(key)
                    if hit and isinstance(value, Mapping):
                        reuse.add(key, EARLY, str(value.get("unit") or ""), recorded_of(value))
        return reuse


def recorded_of(value: Mapping[str, Any]) -> Recorded:
    """A result kept by fingerprint (an early step's memo entry) as the engine takes it back."""
    return Recorded(StepStatus.COMPLETED, value.get("output"), int(value.get("attempts") or 1),
                    int(value.get("alternative") or 0))  # fmt: skip
