"""What a runner sees of a run: :class:`StepContext`, and the :class:`Runner` protocol itself.

Kept apart from the table of runners (:mod:`.runners`) so that runner modules and the
engine import this, and nothing imports in a circle.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Mapping, Protocol

from ...dsl.ir import Step, SubPlan
from .vocabulary import EventType


class StepContext(Protocol):
    """What a runner may do. ``unit_id`` is the full id of what runs (``fetch``, ``review[3]``, ``sub.fetch``)."""

    unit_id: str
    options: Any  # engine.Options: model, completion kwargs, step_max_iterations, default caps

    @property
    def plan(self) -> Any:
        """The plan the unit belongs to (a sub-plan's own, inside one)."""

    def resolve(self, value: Any) -> Any:
        """The run-time value of an IR value (references, templates, placeholders)."""

    def provenance(self, template: Any) -> tuple[str, list[dict]]:
        """A template's text, and where each reference and placeholder in it came from (values.provenance)."""

    def call_tool(self, name: str, args: Mapping[str, Any]) -> Awaitable[Any]:
        """Call one of the run's tools (sync tools run in worker threads)."""

    def tool_specs(self) -> Mapping[str, Any]:
        """The run's tools as :class:`~..dsl.ir.ToolSpec` values (what a model may be offered)."""

    def emit(self, type_: EventType, **data: Any) -> None:
        """An event about this unit, to the journal and every subscriber."""

    def failed(self) -> bool:
        """Whether this unit (a fan-out's item, once settled) failed."""

    def carries_failure_of(self, unit_id: str) -> None:
        """This unit's value holds the failure of ``unit_id`` (a fan-out's list): it carries it (engine/world.py)."""

    def reused_from(self) -> str | None:
        """The run this unit's result was taken from (``--reuse``), or None: it ran (or was replayed)."""

    def took_items(self, count: int, source: str) -> None:
        """This fan-out took ``count`` of its items' results from the run ``source`` (``--reuse``)."""

    def memo(self) -> Any:
        """The memo of completed calls for this unit (None in a run without a journal)."""

    def budget(self) -> Any:
        """The run's :class:`~.llm.Budget`; charging it past a limit raises ``budget-exceeded``."""

    def account(self, usage: Mapping[str, Any]) -> None:
        """Add a model step's tokens, cost and calls to this unit and to the run."""

    async def answer(self, request: Mapping[str, Any]) -> Any:
        """A person's answer to a gate: recorded, asked now, or ``Waiting`` (the run stops durably)."""

    def child(
        self, suffix: str, *, item: Any = None, index: int | None = None, name: str | None = None
    ) -> "StepContext":
        """The context of a child unit ``<unit_id><suffix>`` (a fan-out item knows ``†item``/``†index``)."""

    def holds(self) -> bool:
        """Whether this unit's ``when:`` holds (a fan-out item's condition reads †item)."""

    async def settle(
        self, once: Callable[[], Awaitable[Any]], *, failure_value: bool, reads: Callable[[], Any] | None = None
    ) -> Any:
        """Run this (child) unit to its outcome under the attempt policy: replayed when the journal has it,
        taken from an earlier run by its fingerprint when ``reads`` (what it would read: a fan-out item's
        arguments or prompt) matches one (``--reuse``), events and journal records with its id. A failure
        gives the failure value (``failure_value``) or raises."""

    async def run_plan(self, sub: SubPlan, inputs: Any) -> Any:
        """Run a sub-plan as part of this run, its steps checkpointed as ``<unit_id>.<step>``."""

    def progress(self, **data: Any) -> None:
        """``item 7/12`` / ``iteration 3/10``: a progress event for subscribers (not journaled)."""


class Runner(Protocol):
    per_child: bool  # True: the attempt policy applies to its children, not to the step as a whole

    def prepare(self, ctx: StepContext, step: Step) -> Any: ...

    def run(self, ctx: StepContext, step: Step, prepared: Any) -> Awaitable[Any]: ...
