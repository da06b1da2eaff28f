"""Composition runners: fan-out over lists, sub-plans, bounded loops.

Every child is a unit of its own, checkpointed and evented with an id derived from its
parent's -- ``review[3]`` for a fan-out item, ``sub.fetch`` for a sub-plan's step,
``poll[2]`` for a loop iteration and ``poll[2].check`` for its steps (all file-name
safe) -- so a resumed run replays completed children and runs only the rest, and the
attempt policy applies to each child exactly as to a step.
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable

from ...dsl.ir import Step
from ...dsl.condition import guard_reads_item
from .attempts import Caught, Routed, StepFailure, Waiting
from ..core.context import Runner, StepContext
from ..core.values import MISSING, get_path
from ..core.vocabulary import Cause


class FanOut:
    """``for_each``: the wrapped runner once per item, each item a unit (``step[i]``), results in item order."""

    per_child = True

    def __init__(self, inner: Runner):
        self.inner = inner

    def prepare(self, ctx: StepContext, step: Step) -> Any:
        assert step.for_each is not None  # the table chose this runner because it is set
        return ctx.resolve(step.for_each.over)

    async def run(self, ctx: StepContext, step: Step, items: Any) -> list:
        spec = step.for_each
        assert spec is not None
        if not isinstance(items, (list, tuple)):
            raise StepFailure(f"for_each needs a list, but {spec.over} is {type(items).__name__}")
        cap = spec.max_items or ctx.options.default_max_items
        if cap is not None and len(items) > cap:
            raise StepFailure(f"for_each got {len(items)} items, more than max_items ({cap}); nothing was run")
        limit = asyncio.Semaphore(spec.max_concurrency or max(1, ctx.options.max_concurrency))
        results: list[Any] = [None] * len(items)
        waiting: list[Waiting] = []
        children: list[Any] = [None] * len(items)
        done = 0

        per_item = step.guard is not None and guard_reads_item(step.guard)

        async def one(index: int, item: Any) -> None:
            nonlocal done
            child = children[index] = ctx.child(f"[{index}]", item=item, index=index, name=spec.name)
            if per_item and not child.holds():
                results[index] = _LEFT_OUT  # its condition is false: the item is left out
            else:
                async with limit:
                    try:
                        results[index] = await child.settle(
                            lambda: self._attempt(child, step), failure_value=True,
                            reads=lambda: self.inner.prepare(child, step),
                        )  # fmt: skip
                    except Waiting as wait:
                        waiting.append(wait)  # the other items go on; the step waits once they settled
                        return
            done += 1
            ctx.progress(item=index + 1, done=done, total=len(items), name=spec.name)

        await _gather_all([one(i, item) for i, item in enumerate(items)])
        if waiting:
            raise waiting[0]
        # an item that failed leaves its failure value in the list: the list carries it (world.py)
        failed = next((c.unit_id for c in children if c is not None and c.failed()), None)
        if failed is not None:
            ctx.carries_failure_of(failed)
        taken = [c.reused_from() for c in children if c is not None and c.reused_from()]
        if taken:
            ctx.took_items(len(taken), ", ".join(dict.fromkeys(taken)))  # each run it took from, once
        return _outcome(step, results, items)

    def _attempt(self, child: StepContext, step: Step) -> Awaitable[Any]:
        return self.inner.run(child, step, self.inner.prepare(child, step))


_LEFT_OUT = object()


def _outcome(step: Step, results: list, items: Any) -> Any:
    """The items' results in order; with ``catch:``, failed items' errors go to their entry's path."""
    if not step.catch:
        return [r for r in results if r is not _LEFT_OUT] if _LEFT_OUT in results else results
    routes: dict[int, list] = {entry.alternative: [] for entry in step.catch}
    kept = []
    for index, result in enumerate(results):
        if isinstance(result, Caught):
            routes[result.alternative].append({**result.error, "index": index, "item": items[index]})
        elif result is not _LEFT_OUT:
            kept.append(result)
    return Routed(kept, routes)


async def _gather_all(coros: list) -> None:
    """Run all; the first exception cancels the others (and is raised)."""
    loop = asyncio.get_running_loop()
    tasks = [loop.create_task(c) for c in coros]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


class SubPlanRunner:
    """``plan:``: another plan run as this step; its ``args`` are the child's ``†input``, its result the output."""

    per_child = False

    def prepare(self, ctx: StepContext, step: Step) -> Any:
        return ctx.resolve(step.args)

    def run(self, ctx: StepContext, step: Step, inputs: Any) -> Awaitable[Any]:
        assert step.plan is not None
        return ctx.run_plan(step.plan, inputs)


class LoopRunner:
    """``loop:``: the sub-plan again and again, each result the next input, until ``until`` holds (bounded).

    Each iteration is a unit ``step[i]`` under the attempt policy (its timeout is per iteration).
    """

    per_child = True

    def prepare(self, ctx: StepContext, step: Step) -> Any:
        return ctx.resolve(step.args)

    async def run(self, ctx: StepContext, step: Step, current: Any) -> Any:
        loop = step.loop
        assert loop is not None
        sub = loop.child
        for i in range(loop.max_iterations):
            ctx.progress(iteration=i + 1, total=loop.max_iterations)
            child = ctx.child(f"[{i}]", index=i)

            def iteration(c: StepContext = child, inputs: Any = current) -> Awaitable[Any]:
                return c.run_plan(sub, inputs)

            result = await child.settle(iteration, failure_value=False)
            if loop.until is not None and _holds(loop.until, result):
                return result
            current = result
        if loop.until is None:
            return current
        raise StepFailure(
            f"loop reached max_iterations ({loop.max_iterations}) before {_until_text(loop.until)} held",
            Cause.MAX_ITERATIONS,
        )


def _holds(until: Any, result: Any) -> bool:
    refs = until.options if hasattr(until, "options") else (until,)
    return any(bool(v) for v in (get_path(result, r.path) for r in refs) if v is not MISSING)


def _until_text(until: Any) -> str:
    return str(until).replace("\u2020state", "\u2020result")
