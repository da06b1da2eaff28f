"""Steps run in place (issue 43): a ready step whose tool answers without waiting runs without a task of its
own; steps that wait, or have a timeout, keep theirs, and every timeout cancels the work it was set on."""

from __future__ import annotations

import asyncio
import contextvars

import pytest

import dagplan
from dagplan import tool
from dagplan.interpreter.engine import execution
from dagplan.interpreter.tools.catalog import as_tool


@tool
async def answers(x: int = 0) -> int:
    return x + 1


@tool
async def waits(x: int = 0) -> int:
    await asyncio.sleep(0)
    return x + 1


@tool
async def holds(x: int = 0) -> int:
    async with asyncio.timeout(0.05):  # entered in the task that runs this step: it must cancel only that
        await asyncio.Event().wait()
    return x


def test_only_a_coroutine_that_awaits_nothing_answers_without_waiting():
    async def loops():
        async for _ in aiter_of():  # noqa: B007
            pass

    async def with_block():
        async with asyncio.Lock():
            return 1

    def plain(x: int) -> int:
        return x

    async def aiter_of():
        yield 1

    assert as_tool(answers).never_waits
    for fn in (waits, holds, loops, with_block, plain):
        assert not as_tool(fn).never_waits, fn


def _spy_tasks(monkeypatch) -> list:
    """Every task the engine's executions create for a step."""
    made: list = []
    real = execution.Execution._spawn

    def spawn(self, todo):
        before = set(self._tasks)
        real(self, todo)
        made.extend(set(self._tasks) - before)

    monkeypatch.setattr(execution.Execution, "_spawn", spawn)
    return made


def test_a_fan_out_of_steps_that_answer_at_once_creates_no_task(monkeypatch):
    made = _spy_tasks(monkeypatch)
    steps = "\n".join(f"  - {{id: s{i}, tool: answers, args: {{x: {i}}}, output: †state.s{i}}}" for i in range(50))
    text = "steps:\n" + steps + "\n  - {id: total, tool: answers, args: {x: †state.s49}, output: †state.total}\n"
    result = dagplan.run(dagplan.load(text=text), tools=[answers])
    assert result.status == "completed" and result.state["total"] == 51
    assert made == []
    made.clear()
    waiting = text.replace("tool: answers", "tool: waits")
    assert dagplan.run(dagplan.load(text=waiting), tools=[waits]).state["total"] == 51
    assert len(made) == 50  # the 50 independent steps that wait: a task each (the last runs in one of theirs)


def test_a_timeout_cancels_only_its_own_step_around_steps_run_in_place():
    """A step's timeout, and a timeout the tool enters itself, cancel that step: not the step run in place
    before it in the same chain, not the run (their task would be the caller's if run in place)."""
    text = """
on_failure: continue
steps:
  - {id: first, tool: answers, args: {x: 1}, output: †state.first}
  - {id: own, tool: holds, args: {x: †state.first}, output: †state.own}
  - {id: timed, tool: waits, args: {x: †state.first}, output: †state.timed, timeout: 5}
  - {id: slow, tool: holds, args: {x: 2}, timeout: 0.02, output: †state.slow}
  - {id: after, tool: answers, args: {x: †state.first}, output: †state.after}
"""
    result = dagplan.run(dagplan.load(text=text), tools=[answers, holds, waits])
    assert result.status == "completed" and result.had_errors
    assert result.steps["own"].status == "failed" and "Timeout" in str(result.steps["own"].error)
    assert result.steps["slow"].status == "failed"
    assert [result.steps[s].status for s in ("first", "timed", "after")] == ["completed"] * 3
    assert result.state["timed"] == 3 and result.state["after"] == 3
    chained = "steps:\n  - {id: first, tool: answers, output: †state.first}\n" \
              "  - {id: own, tool: holds, args: {x: †state.first}, output: †state.own}\n"  # fmt: skip
    result = dagplan.run(dagplan.load(text=chained), tools=[answers, holds])  # `own` continues `first`'s chain
    assert result.status == "completed" and result.steps["own"].status == "failed"


def test_what_a_step_run_in_place_sets_in_its_context_stays_its_own():
    flag: contextvars.ContextVar[str] = contextvars.ContextVar("flag", default="unset")
    seen: dict[str, str] = {}

    @tool
    async def marks(name: str) -> str:
        seen[name] = flag.get()
        flag.set(name)
        return name

    @tool
    async def reads(name: str) -> str:
        seen[name] = flag.get()
        await asyncio.sleep(0)
        return name

    text = """
steps:
  - {id: a, tool: marks, args: {name: a}}
  - {id: b, tool: marks, args: {name: b}}
  - {id: c, tool: reads, args: {name: c}}
"""

    async def main():
        flag.set("caller")
        await dagplan.arun(dagplan.load(text=text), tools=[marks, reads])
        return flag.get()

    assert asyncio.run(main()) == "caller"
    assert seen == {"a": "caller", "b": "caller", "c": "caller"}


def test_an_abort_cancels_a_step_that_was_run_in_place_and_then_waited():
    """A step run in place that then waits (here, a retry's backoff) is a task like any other: the run's
    abort (a later step failed under on_failure: abort) cancels it, and the run ends at once."""
    tries: list[int] = []

    @tool
    async def flaky(x: int = 0) -> int:
        tries.append(x)
        raise dagplan.TransientError("not yet")

    @tool
    async def fails() -> int:
        raise RuntimeError("no")

    text = """
on_failure: abort
steps:
  - {id: flaky, tool: flaky, args: {x: 1}, retry: {limit: 3, backoff: 3600}, output: †state.flaky}
  - {id: later, tool: waits, output: †state.later}
  - {id: bad, tool: fails, deps: [later]}
"""
    result = dagplan.run(dagplan.load(text=text), tools=[flaky, fails, waits])
    assert result.status == "aborted" and tries == [1]
    assert result.steps["bad"].status == "failed" and result.steps["flaky"].status == "skipped"


@pytest.mark.parametrize("depth", [3, execution.EAGER_DEPTH + 5])
def test_steps_in_place_inside_one_another_stay_within_a_bound(depth, monkeypatch):
    """A ladder of steps each releasing two that answer at once: deeper than the bound, the rest get tasks
    (no stack that grows with the plan)."""
    deepest = [0]
    real = execution.Execution._spawn

    def spawn(self, todo):
        deepest[0] = max(deepest[0], self._eager_depth)
        real(self, todo)

    monkeypatch.setattr(execution.Execution, "_spawn", spawn)
    lines = ["steps:", "  - {id: r0, tool: answers, output: †state.r0}"]
    for i in range(1, depth):
        lines += [f"  - {{id: l{i}, tool: answers, args: {{x: †state.r{i - 1}}}, output: †state.l{i}}}",
                  f"  - {{id: r{i}, tool: answers, args: {{x: †state.r{i - 1}}}, output: †state.r{i}}}"]  # fmt: skip
    result = dagplan.run(dagplan.load(text="\n".join(lines) + "\n"), tools=[answers])
    assert result.status == "completed" and result.state[f"r{depth - 1}"] == depth
    assert deepest[0] <= execution.EAGER_DEPTH
