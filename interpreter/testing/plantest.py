"""Plan tests: ``*.test.yaml`` files whose cases run a plan offline and assert on what it did.

A test file names a plan (relative to itself), optionally the tool files whose
signatures check the plan's calls, and its cases: inputs, mocks (:mod:`.mocks`) or a
cassette (:mod:`.cassette`), the tools really called (``real``), and ``expect``: the
run's status, ``had_errors``, its result, state paths, steps (status, attempts, output,
error, for a step or a child such as ``review[2]``), call counts, or the error that
stops the run before it starts (``raises``). Values compare with :mod:`.expect`'s matchers.

A case runs through the same engine as production (:func:`.driver.start`, in memory):
the calls seam answers instead of the world, gates are answered from the case, and
retries do not wait their backoff. The events a case's run emitted give its branch
coverage (:mod:`.coverage`). Every problem of a test file is a diagnostic at its line.
"""

from __future__ import annotations

import glob
import os
import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Iterable, Mapping

from ...dsl.errors import DagplanError, Diagnostic, RunError, Span, did_you_mean, error
from ...dsl.ir import Plan, StepKind
from ...dsl.load import TEST_SUFFIXES as SUFFIXES
from ..core.calls import Counted, step_names
from .coverage import PlanCoverage, observe, points, walk
from .expect import mismatches, show
from ..tools.catalog import Tool
from ..core.values import MISSING
from ..core.vocabulary import Event

_SKIP_DIRS = {".git", ".venv", "venv", "node_modules", "__pycache__", ".dagplan", ".tox", "build", "dist"}
_MOCK_MODEL = "dagplan/mock"  # the model of LLM steps when nothing names one (no model is called)


# --- finding and loading test files ------------------------------------------------------------


def find_tests(paths: Iterable[str | os.PathLike]) -> list[str]:
    """Test files among ``paths``: files as given, directories searched (hidden and build folders
    skipped), glob patterns expanded. An empty selection is the caller's to report."""
    found: list[str] = []
    for raw in paths:
        path = os.fspath(raw)
        if os.path.isdir(path):
            for folder, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
                found += [os.path.join(folder, f) for f in sorted(files) if f.endswith(SUFFIXES)]
        elif os.path.exists(path) or not glob.has_magic(path):
            found.append(path)
        else:
            found += sorted(p for p in glob.glob(path, recursive=True) if p.endswith(SUFFIXES))
    return list(dict.fromkeys(found))


@dataclass
class Suite:
    """One loaded test file: its plan (loaded once for every case), its tools and its cases."""

    path: str
    data: dict[str, Any]
    source_map: Any
    plan: Plan
    plan_path: str
    tools: dict[str, Tool]
    cassettes: dict[int, dict[str, Any]] = field(default_factory=dict)

    @property
    def cases(self) -> list[dict[str, Any]]:
        return self.data["cases"]

    def span(self, *path: str | int) -> Span:
        """Where the value at ``path`` is written in the test file."""
        return self.source_map.locate(Span(self.path, path))

    def key_span(self, *path: str | int) -> Span:
        """Where the key naming ``path`` is written (else its value)."""
        found = self.source_map.key_position(path)
        return Span(self.path, path, line=found[0], col=found[1]) if found else self.span(*path)


def load_suite(path: str | os.PathLike, config: Any, text: str | None = None) -> Suite:
    """Read, check and prepare a test file (``text``: its content as an editor holds it); raises
    :class:`RunError` listing every problem at its line."""
    from ...dsl.load import read_document

    name = os.fspath(path)
    data, source_map = read_document(name, holds="test fields", example="write: plan: my.yaml, cases: [...]",
                                     text=text)  # fmt: skip
    problems = _schema_problems(data, name, source_map)
    if problems:
        raise RunError(problems)
    base = os.path.dirname(os.path.abspath(name))
    try:  # its own `tools:`, else the project's (dagplan.toml: the tools `check` and `run` know; MCP servers'
        # only when named: a test runs offline)
        tools = _tools(data["tools"] if data.get("tools") else _configured(config), base)
    except DagplanError as exc:  # a tools file that is missing or does not import: at its entry in `tools:`
        where = source_map.locate(Span(name, ("tools",)))
        for index, source in enumerate(data.get("tools") or []):
            if any(str(source) in d.message for d in exc.diagnostics):
                where = source_map.locate(Span(name, ("tools", index)))
        raise RunError([d if d.span.located else _at(d, where) for d in exc.diagnostics]) from None
    plan_path = os.path.normpath(os.path.join(os.path.dirname(name), data["plan"]))
    plan = _plan(plan_path, tools, config, source_map.locate(Span(name, ("plan",))))
    suite = Suite(name, data, source_map, plan, plan_path, tools)
    problems = _reference_problems(suite)
    for index, case in enumerate(suite.cases):
        if "cassette" in case:
            try:
                from .cassette import read

                suite.cassettes[index] = read(os.path.join(os.path.dirname(name), case["cassette"]))
            except DagplanError as exc:
                problems += [
                    d if d.span.located else _at(d, suite.span("cases", index, "cassette")) for d in exc.diagnostics
                ]
    if problems:
        raise RunError(problems)
    return suite


def check_suite(path: str | os.PathLike, config: Any, text: str | None = None) -> Any:
    """``dagplan check`` of a test file: a :class:`~..dsl.CheckResult` with its problems (and its plan's)."""
    from ...dsl import CheckResult

    name = os.fspath(path)
    try:
        suite = load_suite(name, config, text)
    except DagplanError as exc:
        return CheckResult(name, None, None, tuple(sorted(exc.diagnostics, key=Diagnostic.sort_key)), None)
    return CheckResult(name, None, None, (), None) if suite else None


def _at(diag: Diagnostic, span: Span) -> Diagnostic:
    from dataclasses import replace

    return replace(diag, span=span)


def _schema_problems(data: Any, name: str, source_map: Any) -> list[Diagnostic]:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match

    from ...dsl.schema import schema_diagnostic

    out = []
    for err in Draft202012Validator(test_schema()).iter_errors(data):
        found = schema_diagnostic(_best(err, best_match), data, name, "test-file")
        out.append(_at(found, source_map.locate(found.span)))
    return sorted(out, key=lambda d: (d.span.line, d.span.col))


def _best(err: Any, best_match: Any) -> Any:
    """The error a person needs from a ``oneOf``: the branch of the value's own type, deepest first."""
    while err.context:
        fitting = [e for e in err.context if e.validator != "type"]
        if not fitting:
            return best_match(err.context)
        err = max(fitting, key=lambda e: len(e.absolute_path))
    return err


def test_schema() -> dict[str, Any]:
    """The published JSON Schema of test files."""
    import json
    from ...dsl.schema import schema_text

    return json.loads(schema_text("test.schema.json"))


test_schema.__test__ = False  # type: ignore[attr-defined]  # not a pytest test


def _configured(config: Any) -> list[str]:
    from ..core.config import MCP_SOURCE

    return [s for s in getattr(config, "tools", ()) if not s.startswith(MCP_SOURCE)]


def _tools(sources: list[str], base: str) -> dict[str, Tool]:
    from ..core.config import names_a_file
    from ..tools.sources import load_tools

    paths = [os.path.join(base, s) if names_a_file(s) else s for s in sources]
    return load_tools(paths) if paths else {}


def _plan(path: str, tools: Mapping[str, Tool], config: Any, where: Span) -> Plan:
    from ...dsl import check
    from ...dsl.compose import Budget
    from ...dsl.errors import PlanInvalid

    if not os.path.isfile(path):
        raise RunError([error("test-file", f"plan {path!r} not found", where, "plan: is relative to the test file")])
    specs = {n: t.spec for n, t in tools.items()} if tools else None
    found = check(path, tools=specs, budget=Budget.of(config))
    if not found.ok or found.plan is None:
        raise PlanInvalid(found.diagnostics)
    return found.plan


def _reference_problems(suite: Suite) -> list[Diagnostic]:
    """Mocks, ``real`` tools and expectations that name nothing in the plan (typos), did-you-mean."""
    steps = dict(walk(suite.plan))
    tools = {s.tool for s in steps.values() if s.tool} | {t for s in steps.values() if s.llm for t in s.llm.tools}
    llm = {sid for sid, s in steps.items() if s.kind is StepKind.LLM}
    gates = {sid for sid, s in steps.items() if s.kind is StepKind.GATE}
    out: list[Diagnostic] = []

    def known(names: Iterable[str], among: set[str], what: str, *path: str | int) -> None:
        shorts = among | {sid.rsplit(".", 1)[-1] for sid in among}
        for name in names:
            if not any(n in shorts for n in step_names(name)) and name not in among:
                listed = f"{what}: {', '.join(sorted(among))}" if among else f"the plan has no {what}"
                hint = did_you_mean(name, sorted(shorts), listed)
                out.append(
                    error("test-file", f"{name!r} is not one of the plan's {what}", suite.key_span(*path, name), hint)
                )

    def mocked(mocks: Mapping[str, Any], *path: str | int) -> None:
        known(mocks.get("tools") or {}, tools, "tools", *path, "tools")
        known(mocks.get("llm") or {}, llm, "LLM steps", *path, "llm")
        known(mocks.get("gates") or {}, gates, "gates", *path, "gates")

    mocked(suite.data.get("mocks") or {}, "mocks")
    declared = suite.plan.inputs
    for index, case in enumerate(suite.cases):
        mocked(case.get("mocks") or {}, "cases", index, "mocks")
        for name in case.get("inputs") or {}:
            if declared is not None and name not in declared:
                hint = did_you_mean(
                    name, sorted(declared), f"the plan's inputs: {', '.join(sorted(declared)) or 'none'}"
                )
                out.append(error("test-file", f"input {name!r} is not one of the plan's inputs",
                                 suite.key_span("cases", index, "inputs", name), hint))  # fmt: skip
        for i, name in enumerate(case.get("real") or []):
            if name not in suite.tools:
                hint = did_you_mean(name, sorted(suite.tools), "list its file under tools:")
                out.append(error("test-file", f"real tool {name!r} is not among the test file's tools",
                                 suite.span("cases", index, "real", i), hint))  # fmt: skip
        expect = case.get("expect") or {}
        known(expect.get("steps") or {}, set(steps), "steps", "cases", index, "expect", "steps")
        known(expect.get("calls") or {}, tools | llm, "tools and LLM steps", "cases", index, "expect", "calls")
        out += _matcher_problems(suite, case, index)
    names = [c["name"] for c in suite.cases]
    for index, name in enumerate(names):
        if name in names[:index]:
            out.append(
                error(
                    "test-file",
                    f"two cases are named {name!r}",
                    suite.span("cases", index, "name"),
                    "case names are unique in a file",
                )
            )
    return out


def _matcher_problems(suite: Suite, case: Mapping[str, Any], index: int) -> list[Diagnostic]:
    """A ``$key`` that is no matcher (``$regexp``) would silently compare as data: an error, did-you-mean;
    a matcher's argument that cannot work (``$len: "3"``, ``$type: strng``, a bad or backtracking ``$regex``)."""
    from .expect import MATCHERS, argument_problem

    out = []

    def visit(value: Any, path: tuple) -> None:
        if isinstance(value, dict):
            for key, inner in value.items():
                if isinstance(key, str) and key.startswith("$") and key not in MATCHERS:
                    hint = did_you_mean(key, MATCHERS, f"matchers: {', '.join(MATCHERS)}")
                    out.append(error("test-file", f"{key!r} is not a matcher", suite.key_span(*path, key), hint))
                elif isinstance(key, str) and key in MATCHERS and len(value) == 1:
                    problem = argument_problem(key, inner)
                    if problem is not None:
                        out.append(error("test-file", problem[0], suite.span(*path, key), problem[1]))
                visit(inner, (*path, key))
        elif isinstance(value, list):
            for i, inner in enumerate(value):
                visit(inner, (*path, i))

    for key in ("expect", "mocks"):
        if key in case:
            visit(case[key], ("cases", index, key))
    if index == 0 and "mocks" in suite.data:  # the file's own mocks, once
        visit(suite.data["mocks"], ("mocks",))
    return out


# --- running a case ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Failure:
    """A failed expectation, at the line of the test file that states it."""

    message: str
    span: Span


@dataclass
class CaseResult:
    """One case of a plan test file, run: ``passed``, its ``failures`` (each expectation that did not hold), its
    status, the steps it ran and how long it took."""

    suite: Suite
    index: int
    name: str
    failures: list[Failure]
    duration: float
    events: list[Event]  # what its run emitted
    status: str  # the run's status, or the code of the error that stopped it
    steps: list[dict[str, Any]] = field(default_factory=list)  # the run's steps (:func:`step_rows`)

    @cached_property
    def seen(self) -> set[str]:
        """The coverage points its run reached (computed when coverage is asked for)."""
        return observe(self.suite.plan, self.events)

    @property
    def passed(self) -> bool:
        return not self.failures

    @property
    def span(self) -> Span:
        return self.suite.span("cases", self.index, "name")

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.suite.path,
            "case": self.name,
            "passed": self.passed,
            "status": self.status,
            "duration": round(self.duration, 6),
            "failures": [{"message": f.message, "line": f.span.line, "col": f.span.col} for f in self.failures],
            "steps": self.steps,
        }


async def run_case(suite: Suite, index: int, config: Any, coverage: bool = True) -> CaseResult:
    """Run one case of ``suite`` offline and judge it. Its events are kept for ``coverage`` (and for
    expectations on children: ``fetch[3]``); without them the case costs what a plain run costs."""
    from ..ops.driver import RunRequest, start
    from ..engine.scope import Options

    case = suite.cases[index]
    calls = Counted(_calls(suite, index))
    events: list[Event] = []
    options = Options.from_config(
        config,
        subscribers=[events.append] if coverage or _reads_children(suite, case) else [],
        model=config.default_model or _MOCK_MODEL,
        ask_gate=calls.answer_gate,
        calls=calls,
        backoff_scale=0.0,
    )
    started = time.perf_counter()
    result, raised = None, None
    try:
        result = await start(
            RunRequest(suite.plan, suite.tools, options, inputs=case.get("inputs") or {}, approve=_yes)
        )
    except DagplanError as exc:
        raised = exc
    duration = time.perf_counter() - started
    failures = _unanswered(suite, index, calls)  # the cause first
    judged = _judge(suite, index, result, raised, events, calls)
    if failures:  # a run that met an unmocked call failed because of it: its status says nothing more
        judged = [f for f in judged if not f.message.startswith(("status:", "had_errors:"))]
    failures += judged
    status = str(result.status) if result is not None else (raised.headline.code if raised else "error")
    rows = step_rows(result, calls.inner) if result is not None else []
    return CaseResult(suite, index, case["name"], failures, duration, events, status, rows)


def step_rows(result: Any, calls: Any) -> list[dict[str, Any]]:
    """Each step of a case's run, as a failing case shows them: its call, who answered it (``mock``, ``real``,
    ``cassette``, ``unmocked``; empty for a step that called nothing), its status and its output (or why it
    was skipped, or its error)."""
    mocks = calls.mocks if isinstance(calls, _Replay) else calls
    rows = []
    for sid in result.order:
        step = result.steps[sid]
        by = _answered_by(step, sid, mocks, isinstance(calls, _Replay)) if step.status != "skipped" else ""
        detail = step.reason if step.status == "skipped" else step.head
        rows.append({"step": sid, "call": step.call, "by": by, "status": str(step.status), "output": detail or ""})
    return rows


def _answered_by(step: Any, sid: str, mocks: Any, cassette: bool) -> str:
    if step.call in ("plan", "loop"):  # a composition: its children's calls are answered, not its own
        return ""
    if step.call == "gate":
        return "mock" if sid in mocks.gates else "cassette" if cassette else ""
    if step.call == "llm":
        return "mock" if sid in mocks.llm else _replayed(step) if cassette else "unmocked"
    if step.call in mocks.real:
        return "real"
    if step.call in mocks.tools:
        return "mock"
    if cassette:  # a replay answers every other call from the cassette, pure tools too (_Replay.tool)
        return _replayed(step)
    return "real" if step.call in mocks.pure else "unmocked"


def _replayed(step: Any) -> str:
    """A call a cassette answered, or one it had no recording of (the step failed on that miss)."""
    error = step.error or {}
    return (
        "cassette (miss)" if "CassetteMiss" in str(error.get("type", "")) + str(error.get("code", "")) else "cassette"
    )


def _reads_children(suite: Suite, case: Mapping[str, Any]) -> bool:
    """Whether the case expects something of a unit that is not a step of the plan (an item, a sub-plan's step)."""
    return any(sid not in suite.plan.by_id for sid in ((case.get("expect") or {}).get("steps") or {}))


def _yes(_preview: Any) -> bool:
    return True  # a lazy plan under test is approved: the case is the approval


def _calls(suite: Suite, index: int) -> Any:
    from .mocks import MockCalls

    case = suite.cases[index]
    shared, own = suite.data.get("mocks") or {}, case.get("mocks") or {}
    mocks = {kind: {**(shared.get(kind) or {}), **(own.get(kind) or {})} for kind in ("tools", "llm", "gates")}
    pure = frozenset(n for n, t in suite.tools.items() if t.spec.purity == "pure")  # the tool's own word
    found = MockCalls(tools=mocks["tools"], llm=mocks["llm"], gates=mocks["gates"],
                      real=frozenset(case.get("real") or ()), pure=pure)  # fmt: skip
    if index in suite.cassettes:
        from .cassette import CassetteCalls

        return _Replay(CassetteCalls(suite.cassettes[index], name=f"cassette {case['cassette']}"), found)
    return found


@dataclass
class _Replay:
    """A cassette, and the case's mocks for what the cassette cannot hold (gate answers given in the case)."""

    cassette: Any
    mocks: Any
    offline: bool = True

    def tool(self, unit_id: str, name: str, args: Mapping[str, Any], real: Any) -> Any:
        if name in self.mocks.real or name in self.mocks.tools:
            return self.mocks.tool(unit_id, name, args, real)
        return self.cassette.tool(unit_id, name, args, real)

    def model(self, call: Any, real: Any) -> Any:
        return self.cassette.model(call, real)

    def structured(self, model: str) -> bool:
        return bool(self.cassette.structured(model))

    def answer_gate(self, request: Mapping[str, Any]) -> Any:
        unit_id = str(request.get("step", ""))
        if any(name in self.mocks.gates for name in step_names(unit_id)):
            return self.mocks.answer_gate(request)
        return self.cassette.answer_gate(request)

    @property
    def unmocked(self) -> list:
        return self.mocks.unmocked

    @property
    def misses(self) -> list[str]:
        return self.cassette.misses


def _unanswered(suite: Suite, index: int, calls: Any) -> list[Failure]:
    case = suite.cases[index]
    where = suite.span("cases", index, "mocks") if "mocks" in case else suite.span("cases", index, "name")
    out = [Failure(f"unmocked call: {u.describe()}", where) for u in calls.unmocked]
    out += [Failure(message, suite.span("cases", index, "cassette")) for message in getattr(calls, "misses", [])]
    return out


def _judge(
    suite: Suite, index: int, result: Any, raised: DagplanError | None, events: list[Event], calls: Any
) -> list[Failure]:
    case = suite.cases[index]
    expect = case.get("expect") or {}
    at = lambda *path: (
        suite.span("cases", index, "expect", *path) if "expect" in case else suite.span("cases", index, "name")
    )  # noqa: E731
    if raised is not None:
        wanted = expect.get("raises")
        if wanted is None:
            return [Failure(f"the run did not start: {_error_text(raised)}", at())]
        got = {"code": raised.headline.code, "message": raised.headline.message}
        return [Failure(f"raises: {m}", at("raises")) for m in mismatches(wanted, got, "raises", subset=True)]
    if "raises" in expect:
        return [
            Failure(
                f"raises: expected the run not to start ({show(expect['raises'])}), but it ran: {result.status}",
                at("raises"),
            )
        ]
    out: list[Failure] = []
    status = expect.get("status", "completed")
    if str(result.status) != status:
        why = f" ({result.message})" if result.message else ""
        out.append(Failure(f"status: expected {status}, got {result.status}{why}{_first_error(result)}", at("status")))
    expected_failures = any(s.get("status") in ("failed", "handled") for s in (expect.get("steps") or {}).values())
    had_errors = expect.get("had_errors", None if expected_failures or status != "completed" else False)
    if had_errors is not None and result.had_errors != had_errors:
        out.append(
            Failure(
                f"had_errors: expected {str(had_errors).lower()}, got {str(result.had_errors).lower()}"
                + _first_error(result),
                at("had_errors"),
            )
        )
    if "result" in expect:
        out += [Failure(m, at("result")) for m in mismatches(expect["result"], result.result, "result")]
    for path, wanted in (expect.get("state") or {}).items():
        actual = _state_path(result.state, path)
        if actual is MISSING:
            out.append(
                Failure(
                    f"state.{path}: not written (state has: {', '.join(sorted(result.state)) or 'nothing'})",
                    at("state", path),
                )
            )
        else:
            out += [Failure(m, at("state", path)) for m in mismatches(wanted, actual, f"state.{path}")]
    units = _units(result, events) if expect.get("steps") else {}
    for sid, wanted in (expect.get("steps") or {}).items():
        unit = units.get(sid)
        if unit is None:
            out.append(Failure(f"steps.{sid}: never ran", at("steps", sid)))
            continue
        for key, value in wanted.items():
            actual = unit.get(key, MISSING)
            if actual is MISSING:
                out.append(
                    Failure(
                        f"steps.{sid}.{key}: the step has no {key} (status {unit.get('status')})", at("steps", sid, key)
                    )
                )
                continue
            found = mismatches(value, actual, f"steps.{sid}.{key}", subset=key == "error")
            out += [Failure(m, at("steps", sid, key)) for m in found]
    counts = calls.counts
    for name, calls in (expect.get("calls") or {}).items():
        made = counts.get(name, 0)
        if made != calls:
            out.append(
                Failure(
                    f"calls.{name}: expected {calls} call{'s' if calls != 1 else ''}, got {made}", at("calls", name)
                )
            )
    return out


def _error_text(exc: DagplanError) -> str:
    head = exc.headline
    return f"{head.code}: {head.message}" + (f" ({head.hint})" if head.hint else "")


def _first_error(result: Any) -> str:
    for sid in result.order:
        report = result.steps[sid]
        if report.error:
            return f"; {sid} failed: {report.error.get('type')}: {report.error.get('message')}"
    return ""


def _state_path(state: Mapping[str, Any], path: str) -> Any:
    from ...dsl.expr import state_path
    from ..core.values import get_path

    parts = state_path(path)
    return get_path(state, parts if parts is not None else tuple(path.split(".")))


def _units(result: Any, events: list[Event]) -> dict[str, dict[str, Any]]:
    """Every unit's last known status, attempts, output and error: the journal's own fold of the events
    (:func:`..core.progress.fold`), the top-level steps from the run's report."""
    from ..core.progress import empty_state, fold

    state = empty_state()
    for event in events:
        fold(state, event.to_json())
    units: dict[str, dict[str, Any]] = {uid: dict(row) for uid, row in state["steps"].items()}
    for sid in result.order:
        report = result.steps[sid]
        entry = {"status": str(report.status), "attempts": report.attempts}
        if report.output is not MISSING and report.status.has_output:
            entry["output"] = report.output
        if report.error:
            entry["error"] = dict(report.error)
        units[sid] = entry
    return units


# --- a whole run of tests ---------------------------------------------------------------------


@dataclass
class TestReport:
    """What ``dagplan test`` found: each case's result, the files that could not be run, the coverage."""

    results: list[CaseResult]
    errors: list[tuple[str, DagplanError]]  # test files that could not be loaded
    suites: list[Suite]
    duration: float
    with_coverage: bool = True

    __test__ = False  # not a pytest class

    @property
    def passed(self) -> int:
        return sum(r.passed for r in self.results)

    @property
    def failed(self) -> int:
        return len(self.results) - self.passed

    def coverage(self) -> list[PlanCoverage]:
        if not self.with_coverage:
            raise ValueError("this report was made without coverage: run the tests with coverage=True")
        by_plan: dict[str, PlanCoverage] = {}
        for suite in self.suites:
            key = os.path.abspath(suite.plan_path)
            if key not in by_plan:
                by_plan[key] = PlanCoverage(suite.plan_path, points(suite.plan, possible_only=True), set())
        for result in self.results:
            by_plan[os.path.abspath(result.suite.plan_path)].covered |= result.seen
        return list(by_plan.values())

    def runs_of(self, plan_path: str) -> list[set[str]]:
        return [r.seen for r in self.results if os.path.abspath(r.suite.plan_path) == os.path.abspath(plan_path)]

    def to_json(self, coverage: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "passed": self.passed,
            "failed": self.failed,
            "errors": [{"file": f, "diagnostics": [d.format() for d in e.diagnostics]} for f, e in self.errors],
            "duration": round(self.duration, 6),
            "cases": [r.to_json() for r in self.results],
        }
        if coverage:
            out["coverage"] = [c.to_json() for c in self.coverage()]
        return out


async def run_tests(paths: Iterable[str], config: Any, select: str | None = None, coverage: bool = True) -> TestReport:
    """Every case of every test file among ``paths`` (``select``: only cases whose name holds it;
    ``coverage``: keep what :meth:`TestReport.coverage` needs)."""
    started = time.perf_counter()
    results, errors, suites = [], [], []
    for path in find_tests(paths):
        try:
            suite = load_suite(path, config)
        except DagplanError as exc:
            errors.append((path, exc))
            continue
        suites.append(suite)
        for index, case in enumerate(suite.cases):
            if select is None or select in case["name"]:
                results.append(await run_case(suite, index, config, coverage))
    return TestReport(results, errors, suites, time.perf_counter() - started, coverage)
