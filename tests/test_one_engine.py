"""One engine, one vocabulary: each rule holds for every kind of step and every shape of plan.

Each test here reproduces a defect of the engine before the redesign (issue "one engine,
one vocabulary"): a rule written in two places that had drifted apart.
"""

from __future__ import annotations

import ast
import json
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

import dagplan
from dagplan import EventType, MemoryRegistry, RunStatus, StepStatus
from dagplan.cli import cli

ROOT = Path(__file__).resolve().parent.parent


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


class Flaky(Exception):
    """An error only this tool knows to be transient."""


def flaky_tool(fail_times: dict):
    @dagplan.tool(name="clean", retry_on=[Flaky], purity="pure")  # reads: retried by default
    def clean(x: str) -> str:
        left = fail_times.get(x, 0)
        if left:
            fail_times[x] = left - 1
            raise Flaky(f"{x} is not ready")
        if x == "bad":
            raise ValueError("cannot clean bad")
        return x.upper()

    return clean


FAN_OUT = """\
    inputs: {xs: {type: array}}
    steps:
      - id: clean
        for_each: †input.xs
        max_items: 10
        as: page
        tool: clean
        args: {x: †item}
        retry: {limit: 3, backoff: 0}
        output: †state.cleaned
    result: †state.cleaned
    """


# --- one attempt policy ------------------------------------------------------------------------


def test_retry_on_of_a_tool_applies_inside_for_each_as_to_a_plain_step(tmp_path):
    plan = write(tmp_path, "p.yaml", FAN_OUT)
    result = dagplan.run(str(plan), tools=[flaky_tool({"b": 2})], inputs={"xs": ["a", "b", "c"]})
    assert result.status is RunStatus.COMPLETED and not result.had_errors
    assert result.result == ["A", "B", "C"]

    single = write(
        tmp_path,
        "one.yaml",
        """\
        steps:
          - {id: clean, tool: clean, args: {x: b}, retry: {limit: 3, backoff: 0}, output: †state.c}
        result: †state.c
        """,
    )
    assert dagplan.run(str(single), tools=[flaky_tool({"b": 2})]).result == "B"


def test_every_item_attempt_has_its_events_with_its_own_id(tmp_path):
    plan = write(tmp_path, "p.yaml", FAN_OUT.replace("retry: {limit: 3, backoff: 0}", "retry: {limit: 1, backoff: 0}"))
    events: list[dagplan.Event] = []
    result = dagplan.run(
        str(plan), tools=[flaky_tool({"b": 1})], inputs={"xs": ["a", "b", "bad"]}, subscribers=[events.append]
    )
    assert result.had_errors
    by_step: dict[str, list[EventType]] = {}
    for e in events:
        if e.step is not None and e.type is not EventType.STEP_PROGRESS:
            by_step.setdefault(e.step, []).append(e.type)
    started, called = EventType.STEP_STARTED, EventType.TOOL_CALLED  # each attempt's call is an event of its own
    assert by_step["clean[0]"] == [started, called, EventType.STEP_COMPLETED]
    assert by_step["clean[1]"] == [started, called, EventType.STEP_RETRYING, called, EventType.STEP_COMPLETED]
    assert by_step["clean[2]"] == [started, called, EventType.STEP_FAILED]  # the failed item has its own
    failed = next(e for e in events if e.type is EventType.STEP_FAILED)
    assert failed.data["error"] == {"step": "clean[2]", "type": "ValueError", "message": "cannot clean bad"}
    assert result.result == ["A", "B", "(FAILED: ValueError: cannot clean bad)"]


def test_the_failed_item_is_journaled_too(tmp_path):
    plan = write(tmp_path, "p.yaml", FAN_OUT)
    result = dagplan.run(
        str(plan), tools=[flaky_tool({})], inputs={"xs": ["a", "bad"]}, durable=True, state_dir=tmp_path / "state"
    )
    journaled = [
        (e.type, e.step)
        for e in dagplan.events(result.run_id, tmp_path / "state")
        if e.step and e.step.startswith("clean[")
    ]
    assert (EventType.STEP_FAILED, "clean[1]") in journaled
    row = dagplan.run_report(result.run_id, tmp_path / "state").children["clean[1]"]
    assert row.status is StepStatus.FAILED and row.error["type"] == "ValueError"


# --- `as:` -------------------------------------------------------------------------------------


def test_as_names_the_item_in_progress_and_started_events(tmp_path):
    plan = write(tmp_path, "p.yaml", FAN_OUT)
    events: list[dagplan.Event] = []
    dagplan.run(
        str(plan), tools=[flaky_tool({})], inputs={"xs": ["a", "b"]}, subscribers=[events.append], max_concurrency=1
    )
    progress = [e.data for e in events if e.type is EventType.STEP_PROGRESS]
    assert [(p["name"], p["done"], p["total"]) for p in progress] == [("page", 1, 2), ("page", 2, 2)]
    from dagplan.views import progress_text

    assert progress_text(progress[0]) == "page 1/2"
    started = [e.data for e in events if e.type is EventType.STEP_STARTED and e.step == "clean[1]"]
    assert started[0]["name"] == "page" and started[0]["item"] == 1


def test_a_bad_as_gets_a_message_and_a_hint_not_a_regular_expression(tmp_path):
    plan = write(tmp_path, "p.yaml", FAN_OUT.replace("as: page", "as: $item.title"))
    (diag,) = dagplan.check(plan).errors
    assert diag.message == "as '$item.title' is not a plain name"
    assert "†item" in diag.hint and "^[" not in diag.message + diag.hint
    assert (diag.span.line, diag.span.col) == (6, 9)


# --- statuses: one vocabulary ---------------------------------------------------------------------


GATED = """\
    steps:
      - {id: look, tool: look, output: †state.seen}
      - {id: ok, gate: {question: "Go on?", choices: [yes, no]}, deps: [look], output: †state.ok}
      - {id: act, tool: look, deps: [ok], output: †state.done}
    """


def look() -> str:
    return "seen"


def test_a_run_waiting_at_a_gate_shows_the_gate_waiting_not_skipped(tmp_path):
    plan = write(tmp_path, "p.yaml", GATED)
    state = tmp_path / "state"
    result = dagplan.run(str(plan), tools={"look": look}, durable=True, state_dir=state)
    assert result.status is RunStatus.WAITING
    assert [w["step"] for w in result.waiting] == ["ok"]  # typed, not parsed from a message
    report = dagplan.run_report(result.run_id, state)
    assert report.status is RunStatus.WAITING
    assert {sid: row.status for sid, row in report.steps.items()} == {
        "look": StepStatus.COMPLETED,
        "ok": StepStatus.WAITING,
        "act": StepStatus.PENDING,
    }
    assert (report.done, report.total) == (1, 3)
    out = CliRunner().invoke(cli, ["runs", "show", result.run_id, "--state-dir", str(state)])
    assert "1/3" in out.output and "skipped" not in out.output and "waiting" in out.output


def test_statuses_in_results_and_reports_are_the_journal_s_words(tmp_path):
    plan = write(tmp_path, "p.yaml", GATED)
    state = tmp_path / "state"
    result = dagplan.run(str(plan), tools={"look": look}, durable=True, state_dir=state, ask_gate=lambda r: "yes")
    assert result.steps["look"].status is StepStatus.COMPLETED
    stored = {e.step: e.type for e in dagplan.events(result.run_id, state) if e.type is EventType.STEP_COMPLETED}
    assert set(stored) == {"look", "ok", "act"}
    shown = json.loads(
        CliRunner().invoke(cli, ["runs", "show", result.run_id, "--state-dir", str(state), "--format", "json"]).output
    )
    assert {s["status"] for s in shown["steps"].values()} == {"completed"}
    assert json.loads(json.dumps(result.to_json()))["steps"]["look"]["status"] == "completed"


def test_event_types_and_statuses_are_spelled_only_in_the_vocabulary():
    """No event type or status literal outside the module that defines them (one mapping)."""
    from dagplan.interpreter.core.vocabulary import EventType, RunStatus, StepStatus

    words = {str(t) for t in EventType if t is not EventType.MEMO} | {"completed_with_result"}  # "memo" is
    # also the name of the folded state's memo table
    offenders = []
    for folder in ("interpreter", "dagplan", "dsl"):
        for path in (ROOT / folder).rglob("*.py"):
            if path.name == "vocabulary.py":
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in words:
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    assert not offenders, "\n".join(offenders)
    assert StepStatus.COMPLETED == "completed" and RunStatus.WAITING == "waiting"


# --- the journal protocol -------------------------------------------------------------------------


def test_an_in_memory_registry_keeps_a_run_resumable(tmp_path):
    """The durability semantics without a disk: a waiting run answered and resumed, nothing run twice."""
    plan = write(tmp_path, "p.yaml", GATED)
    calls = []

    def counted() -> str:
        calls.append(1)
        return "seen"

    registry = MemoryRegistry()
    first = dagplan.run(str(plan), tools={"look": counted}, durable=True, state_dir=registry)
    assert first.status is RunStatus.WAITING and len(calls) == 1
    [info] = dagplan.runs(registry)
    assert info.status is RunStatus.WAITING and info.id == first.run_id
    dagplan.answer(first.run_id, "ok", "yes", registry)
    done = dagplan.resume(first.run_id, tools={"look": counted}, state_dir=registry)
    assert done.status is RunStatus.COMPLETED and len(calls) == 2  # `look` replayed, `act` ran
    assert done.steps["look"].replayed and done.steps["ok"].status is StepStatus.COMPLETED
    assert dagplan.discard(first.run_id, registry) == first.run_id and dagplan.runs(registry) == []


def test_a_unit_failed_as_interrupted_is_asked_about_again_on_the_next_resume():
    """An interrupted side effect nobody could decide about fails; a later resume must not run it silently."""
    from dagplan.interpreter.engine.resume import INTERRUPTED_ERROR, action_for

    policy = {"side_effect": "ask", "undeclared": "retry"}
    error = {"type": INTERRUPTED_ERROR, "message": "x"}
    assert action_for(StepStatus.FAILED, "side_effect", policy, error) == "ask"
    assert action_for(StepStatus.FAILED, "side_effect", policy, {"type": "ValueError"}) == "run"
    assert action_for(StepStatus.INTERRUPTED, "side_effect", policy) == "ask"


def test_a_registry_is_what_the_file_store_and_the_memory_one_both_are(tmp_path):
    from dagplan.interpreter.stores.journal import Journal, Registry
    from dagplan.interpreter.stores.store import RunStore

    for registry in (RunStore(tmp_path), MemoryRegistry()):
        assert isinstance(registry, Registry)
        journal = registry.create(plan_doc={"steps": [{"id": "a", "tool": "t"}]}, plan_name="p", inputs={})
        assert isinstance(journal, Journal)


# --- layers ----------------------------------------------------------------------------------------


PACKAGES = {
    "dsl": ROOT / "dsl",
    "interpreter": ROOT / "interpreter",
    "schemas": ROOT / "schemas",
    "dagplan": ROOT / "dagplan",
}


def _module_name(path: Path) -> str:
    for top, folder in PACKAGES.items():
        if path.is_relative_to(folder):
            rel = path.relative_to(folder).with_suffix("")
            parts = [] if rel.name == "__init__" else list(rel.parts)
            if rel.name == "__init__":
                parts = list(rel.parent.parts)
            prefix = "dagplan" if top == "dagplan" else f"dagplan.{top}"
            return ".".join([prefix, *parts]) if parts else prefix
    raise ValueError(path)


def _imports(path: Path) -> set[str]:
    """Modules of ours that ``path`` imports (relative imports resolved), top level or in functions."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("dagplan"):
                found.add(target)
                for alias in node.names:  # `from . import api`: a module, not a name
                    candidate = f"{target}.{alias.name}"
                    if _exists(candidate):
                        found.add(candidate)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("dagplan")}
    return found


def _exists(module: str) -> bool:
    try:
        return _path_of(module) is not None
    except ValueError:
        return False


def _path_of(module: str) -> Path | None:
    parts = module.split(".")
    if parts[:2] in (["dagplan", "dsl"], ["dagplan", "interpreter"], ["dagplan", "schemas"]):
        folder, rest = PACKAGES[parts[1]], parts[2:]
    elif parts[0] == "dagplan":
        folder, rest = PACKAGES["dagplan"], parts[1:]
    else:
        raise ValueError(module)
    for candidate in (folder.joinpath(*rest).with_suffix(".py"), folder.joinpath(*rest, "__init__.py")):
        if rest and candidate.is_file():
            return candidate
    if not rest:
        return folder / "__init__.py"
    return None


def _layer(module: str) -> str:
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in ("dsl", "interpreter", "schemas"):
        return parts[1]
    if len(parts) > 1 and parts[1] in ("cli", "__main__"):
        return "cli"
    return "facade"


ALLOWED = {  # who may import whom
    "dsl": {"dsl", "schemas"},
    "interpreter": {"dsl", "interpreter", "schemas"},
    "facade": {"dsl", "interpreter", "schemas", "facade"},
    "cli": {"facade", "cli", "dsl"},
}
CLI_MAY_IMPORT = (  # the public API, its renderers and the viewer it serves (each a module or a package)
    "dagplan",
    "dagplan.api",
    "dagplan.project",  # dagplan.Project: the front door every command builds its context with
    "dagplan.settings",  # dagplan.RunSettings: the run settings whose fields generate the CLI's options
    "dagplan.planning",  # plans a model writes, the agent loop, evaluate
    "dagplan.pool",  # runs for the workers of a run database
    "dagplan.plantests",  # plan tests and cassettes
    "dagplan._doors",  # what the doors share that is not for users (recognising files, outlines, shown state)
    "dagplan.views",
    "dagplan.render",
    "dagplan.render_tests",
    "dagplan.web",
    "dagplan.mcp_server",
    "dagplan.lsp",
    "dagplan.dsl.errors",
)


def _cli_may_import(target: str) -> bool:
    return any(target == allowed or (allowed != "dagplan" and target.startswith(allowed + ".")) for allowed in
               CLI_MAY_IMPORT)  # fmt: skip


def test_the_allow_list_names_modules_that_exist():
    modules = _all_modules()
    assert [m for m in CLI_MAY_IMPORT if m not in modules and not any(n.startswith(m + ".") for n in modules)] == []


def _graph() -> dict[str, set[str]]:
    graph = {}
    for folder in PACKAGES.values():
        for path in folder.rglob("*.py"):
            graph[_module_name(path)] = _imports(path)
    return graph


def test_layers_hold():
    problems = []
    for module, imported in _graph().items():
        layer = _layer(module)
        for target in imported:
            if _layer(target) not in ALLOWED[layer]:
                problems.append(f"{module} ({layer}) imports {target} ({_layer(target)})")
            if layer == "cli" and _layer(target) != "cli" and not _cli_may_import(target):
                problems.append(f"{module}: the CLI imports {target}; it may call only the public API and renderers")
    assert not problems, "\n".join(sorted(problems))


ROOMS = (
    "core",
    "tools",
    "observe",
    "stores",
    "llm",
    "engine",
    "ops",
    "testing",
)  # the interpreter's rooms, lowest first


def _room(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["dagplan", "interpreter"] else None


def test_the_rooms_are_the_tree_and_each_says_what_it_holds():
    folder = PACKAGES["interpreter"]
    found = {p.name for p in folder.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert found == set(ROOMS)
    assert sorted(p.name for p in folder.glob("*.py")) == ["__init__.py"]  # no module outside a room
    for room in ROOMS:
        assert ast.get_docstring(ast.parse((folder / room / "__init__.py").read_text(encoding="utf-8")))


def test_a_room_imports_only_the_rooms_below_it():
    """Lazy imports included: a function-level import is still a dependency of the room."""
    problems = []
    for module, imported in _graph().items():
        room = _room(module)
        if room is None:
            continue
        for target in imported:
            other = _room(target)
            if other is not None and ROOMS.index(other) > ROOMS.index(room):
                problems.append(f"{module} ({room}) imports {target} ({other})")
    assert not problems, "\n".join(sorted(problems))


def test_no_import_circles_between_modules_even_lazily_or_for_types():
    """No module reaches itself through imports: function-level ones and those under ``if TYPE_CHECKING:``
    included (a type-only import back is still a module that cannot be read without the other)."""
    import graphlib

    modules = _all_modules()
    graph = {}
    for folder in PACKAGES.values():
        for path in folder.rglob("*.py"):
            if path.name == "__init__.py":  # a package re-exporting its modules is not a circle
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            name = _module_name(path)
            graph[name] = {t for t in _imports_of_tree(tree, path) if t in modules and t != name}
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        pytest.fail(f"import cycle: {' -> '.join(exc.args[1])}")


def test_no_import_circles_between_modules_at_import_time():
    """Module-level imports form no cycle (imports inside functions are lazy and may point back)."""
    graph = {}
    for folder in PACKAGES.values():
        for path in folder.rglob("*.py"):
            name = _module_name(path)
            tree = ast.parse(path.read_text(encoding="utf-8"))
            top = ast.Module(
                body=[
                    n
                    for n in tree.body
                    if isinstance(n, (ast.Import, ast.ImportFrom, ast.Try))
                    or (isinstance(n, ast.If) and not _is_type_checking(n))
                ],
                type_ignores=[],
            )
            graph[name] = {t for t in _imports_of_tree(top, path) if t in _all_modules()}
    import graphlib

    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        pytest.fail(f"import cycle: {' -> '.join(exc.args[1])}")


def _all_modules() -> set[str]:
    return {_module_name(p) for folder in PACKAGES.values() for p in folder.rglob("*.py")}


def _imports_of_tree(tree: ast.Module, path: Path) -> set[str]:
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - (node.level - 1)] if node.level else []
            target = ".".join(base + ([node.module] if node.module else [])) if node.level else node.module or ""
            for alias in node.names:
                candidate = f"{target}.{alias.name}"
                found.add(candidate if _exists(candidate) else target)
    return found


def _is_type_checking(node: ast.If) -> bool:
    return isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def test_check_does_not_import_the_interpreter_s_heavy_parts():
    import subprocess

    code = (
        "import sys, dagplan.dsl; from dagplan.dsl import check; "
        "check(text='steps: [{id: a, tool: t}]'); print(sorted(m for m in sys.modules if "
        "m.startswith(('litellm', 'dagplan.interpreter.engine.execution'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
