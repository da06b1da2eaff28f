"""``dagplan mcp``: dagplan as an MCP server, so an agent host (Claude Desktop, Cursor, VS Code, any MCP
client) can ask it to check, preview, estimate and (when allowed) run plans.

Tools (each answers ``structuredContent`` under a declared ``outputSchema``):

- ``check_plan(plan, name)``: the diagnostics as data, exactly ``dagplan check --format json``'s, each
  with its position and repair hint; ``list_tools()``: what a plan may call here (name, parameters,
  purity, destructive); ``preview_plan(plan)``, ``estimate_plan(plan)``; ``list_runs()``.
- Only with ``--allow-run``: ``run_plan(plan, inputs)``, ``answer_gate(run_id, step, value)``,
  ``run_status(run_id)``. A plan whose steps have side effects (a tool that is not pure or idempotent)
  stops before the first of them at a gate, ``approve_side_effects``, for a person to answer (with
  ``answer_gate`` or ``dagplan answer``) unless the server was started with ``--allow-side-effects``.

Resources: the plan JSON Schema, a language reference, example plans. A prompt, ``write_plan``,
teaches a model to write a plan for a task with the tools at hand.

Like the viewer, this module only calls the public API (:mod:`dagplan.api`).
"""

from __future__ import annotations

import json
import os
from typing import Any

from mcp.server.mcpserver import Context  # the SDK reads the tools' annotations in this module's names
from typing_extensions import TypedDict  # pydantic (the SDK) needs this one on Python < 3.12

from . import api

from . import planning

REFERENCE = """# dagplan plans, in short

A plan is a YAML (or JSON) document with `steps`, a directed acyclic graph run with as much
concurrency as its references allow. Each step has an `id` and one kind:

- `tool: NAME` with `args: {...}` (a tool of the catalog: see `list_tools`; MCP tools are `SERVER.TOOL`)
- `llm: "the prompt"` (a model call; `output_schema: {...}` beside it for a JSON answer, `tools: [...]`
  for the tools the model may call)
- `gate: {question: "...", choices: [approve, reject]}` (a person decides, never you: a plan run through
  this server stops there until a person answers; a refusal fails the gate)
- `plan: other.yaml` with `input:` (a sub-plan), `loop:` (repeat until), `for_each: †state.items` (fan-out)

Data flows through references: `†input.NAME` (the plan's `inputs`), `†state.PATH` (what a step wrote
with `output: †state.PATH`), `†item` / `†index` inside `for_each`. In text, `#ID` is a step's output
(`#ID.summary`, `#ID.head=200`, `#ID.last=200`). An output may branch: `output: †state.ok || †state.err`.

Optional keys of a step: `deps: [ids]` (order without data), `when: CONDITION` (e.g.
`†state.ci.status == "failed" and †input.attempt < 3`), `retry: {limit: 3, backoff: 0.5}`, `timeout: 30s`,
`catch: [{errors: [TypeName], output: †state.problem}]`, `purity: pure | idempotent | side_effect`.
Plan keys: `summary`, `inputs` (JSON Schemas), `steps`, `result: †state.PATH`, `on_failure:
abort | continue | skip_dependents`.

Check a plan with `check_plan` before anything else: every diagnostic has a `code`, a position
(`line`, `col`) and a `hint` that says how to repair it.
"""

EXAMPLES = {
    "refund.yaml": """summary: Refund a customer after a person approves
on_failure: skip_dependents
inputs:
  customerId: {type: string}
  amount: {type: number}
steps:
  - id: history
    tool: checkBillingHistory
    args: {customerId: †input.customerId}
    output: †state.history
  - id: approve
    gate:
      question: "Refund †input.amount to †input.customerId (†state.history.orders orders)?"
      choices: [approve, reject]
  - id: refund
    tool: issueRefund
    args: {customerId: †input.customerId, amount: †input.amount}
    deps: [approve]
    output: †state.refund
result: †state.refund
""",
    "review_prs.yaml": """summary: Review every open pull request, then summarize
inputs:
  repo: {type: string}
steps:
  - id: prs
    tool: listPullRequests
    args: {repo: †input.repo}
    output: †state.prs
  - id: review
    for_each: †state.prs
    max_items: 20
    llm: "Review this pull request in three sentences: †item.title"
    output: †state.reviews
  - id: summary
    llm: "Summarize these reviews for the team: #review.head=2000"
    output: †state.summary
result: †state.summary
""",
}


class Diagnostic(TypedDict):
    severity: str  # error | warning
    code: str
    message: str
    line: int | None
    col: int | None
    path: list[str | int]
    hint: str | None


class Checked(TypedDict):
    valid: bool  # false while any error remains
    tools_checked: bool  # false when this server knows no tools: tool names and arguments were not checked
    diagnostics: list[Diagnostic]


class RunAnswer(TypedDict, total=False):
    run_id: str
    status: str  # completed | failed | waiting | ...
    message: str
    had_errors: bool
    result: Any
    steps: dict[str, Any]
    waiting: list[dict[str, Any]]  # the gates the run waits at: answer them with answer_gate


def build(allow_run: bool = False, allow_side_effects: bool = False, state: Any = None, *,
          allow_answer: bool = False, root: str | None = None, tool_sources: tuple[str, ...] = ()) -> Any:  # fmt: skip
    """The server (an SDK ``MCPServer``), its tools registered by what the operator allowed. ``root``: the
    project folder (the working directory): the only place plan files named by a client are read from.
    ``tool_sources``: tool files or modules besides the configuration's (``dagplan mcp --tools``)."""
    from mcp.server.mcpserver import MCPServer
    from mcp_types import ToolAnnotations

    here = Here(os.path.realpath(root or os.getcwd()), state, tuple(tool_sources))
    from . import __version__

    server = MCPServer(
        "dagplan",
        version=__version__,  # what `initialize` reports as serverInfo.version
        log_level="WARNING",  # the SDK's INFO chatter is not for the host's log
        instructions="Write plans as dagplan YAML; check them with check_plan and repair every error it "
        "reports (each has a hint) before preview_plan or run_plan. Read dagplan://reference first.",
    )
    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    @server.tool(annotations=read_only, structured_output=True)
    @_answers
    def check_plan(plan: str, name: str = "plan.yaml") -> Checked:
        """Check a plan (YAML or JSON text) as `dagplan check` does: its diagnostics (code, line, col,
        message, hint), warnings included. `valid` is false while any error remains."""
        return here.checked(plan, name)

    @server.tool(annotations=read_only, structured_output=True)
    @_answers
    def list_tools() -> dict[str, Any]:
        """The tools a plan may call here: name, description, parameters (JSON Schema), purity, destructive."""
        return {"tools": [s.to_json() for s in here.project.catalog()]}

    @server.tool(annotations=read_only, structured_output=True)
    @_answers
    def preview_plan(plan: str, name: str = "plan.yaml") -> dict[str, Any]:
        """What a valid plan would do, running nothing: steps, arguments, order, parallel groups, branches."""
        return _plain(here.project.preview(here.loaded(plan, name), here.tools()).to_json())

    @server.tool(annotations=read_only, structured_output=True)
    @_answers
    def estimate_plan(plan: str, name: str = "plan.yaml") -> dict[str, Any]:
        """The worst-case cost of a valid plan: model calls, input tokens and dollars."""
        return _plain(here.project.estimate(here.loaded(plan, name)).to_json())

    @server.tool(annotations=read_only, structured_output=True)
    @_answers
    def list_runs() -> dict[str, Any]:
        """The runs kept here, newest first: id, plan, status."""
        return _plain({"runs": [r.to_json() for r in here.project.runs()]})

    if allow_run:
        _run_tools(server, here, allow_side_effects, allow_answer)
    _resources(server, here)
    return server


class Here:
    """The server's project (a :class:`dagplan.Project`: its folder, configuration, tools and where its runs
    are kept, built as every door builds it) and the runs this server started itself."""

    def __init__(self, root: str, state: Any, tool_sources: tuple[str, ...] = ()):
        from .project import Project

        self.project = Project(root, state=state, tool_sources=tool_sources)
        self.root = root  # where a client's plan text belongs (its sub-plans are read under it)
        self.mine: set[str] = set()

    @property
    def state(self) -> Any:
        return self.project.state

    def tools(self) -> dict:
        return self.project.tools or {}

    def name(self, name: str) -> str:
        """Where a client's plan text belongs: beside the server's folder, whatever path its name gives."""
        base = os.path.basename(name.replace("\0", "").replace("\\", "/"))
        return os.path.join(self.root, base if base not in ("", ".", "..") else "plan.yaml")

    def checked(self, plan: str, name: str) -> Checked:
        plan = self.text_of(plan)
        own = self.name(name)
        result = self.project.check_text(plan, own, root=self.root)
        found = []
        for d in result.diagnostics:
            shown = d.to_json()
            file = shown.pop("file", None)
            if file and file != own:  # another file's problem (a sub-plan): say which file, relative
                shown["file"] = os.path.relpath(file, self.root) if os.path.isabs(file) else file
            found.append(shown)
        checked_tools = self.project.tools_known
        if not checked_tools:  # `valid` must not read as "its tools exist": say what was not checked
            from .dsl.errors import warning

            note = warning("tools-unchecked", "tool names and arguments were not checked: this server knows no "
                           "tools", hint="give the server its tools: `tools = [...]` in its dagplan.toml, or "
                           "dagplan mcp --tools FILE").to_json()  # fmt: skip
            note.pop("file", None)
            found.append(note)
        return {"valid": result.ok, "tools_checked": checked_tools, "diagnostics": found}  # type: ignore[typeddict-item]

    def text_of(self, plan: str) -> str:
        """``plan`` is the plan's text: a client that passed a file's path instead is told so (reading a
        path a model chose is not this server's to do; the text is what it can check)."""
        from .dsl.errors import RunError

        one_line = plan.strip()
        if one_line and "\n" not in one_line and one_line.endswith((".yaml", ".yml", ".json")) and ":" not in one_line:
            raise RunError.make("bad-argument", f"plan takes the plan's text, not a file name ({one_line[:200]!r})",
                                hint="read the file and pass its content as plan (and its name as name)")  # fmt: skip
        return plan

    def loaded(self, plan: str, name: str) -> Any:
        """The plan, loaded against the tools here; an invalid plan answers with its diagnostics."""
        from .dsl.errors import PlanInvalid

        from mcp.server.mcpserver.exceptions import ToolError

        plan = self.text_of(plan)

        try:
            return api.load(text=plan, name=self.name(name), tools=self.tools(), root=self.root)
        except PlanInvalid as exc:  # the model reads why, and how to repair it
            raise ToolError("the plan is not valid: " + json.dumps(self.checked(plan, name))) from exc

    def as_sent(self, plan: Any) -> Any:
        """A plan a client sent as text, named as such in the runs it makes (``(sent by a client) plan.yaml``),
        not by a path beside the server's folder where no file is; a plan of a file there keeps its path."""
        from .dsl.record import replace

        if os.path.isfile(plan.source):
            return plan
        return replace(plan, source=f"(sent by a client) {os.path.basename(plan.source)}")

    def own(self, run_id: str) -> str:
        """``run_id`` when this server started it; else the error a client gets."""
        from .dsl.errors import RunError

        if run_id not in self.mine:
            raise RunError.make(
                "not-this-clients-run",
                f"run {run_id!r} was not started through this server session",
                hint="a client continues only the runs it started with run_plan in this session; a person goes "
                f"on with it in the project folder: dagplan resume {run_id}",
            )
        return run_id


def _answers(fn: Any) -> Any:
    """The one path from an error to what a client reads: a dagplan error is its diagnostics (code,
    message, hint, position) as JSON text, anything else its type and message; never a traceback."""
    from .dsl.errors import translating

    return translating(Exception, _refused)(fn)


def _refused(exc: BaseException) -> Exception:
    from .dsl.errors import DagplanError

    from mcp.server.mcpserver.exceptions import ToolError

    if isinstance(exc, ToolError):
        return exc
    if isinstance(exc, DagplanError):
        found = [{k: v for k, v in d.to_json().items() if v is not None} for d in exc.diagnostics]
        return ToolError(json.dumps({"error": found[0]["code"] if found else "error", "diagnostics": found}))
    return ToolError(f"{type(exc).__name__}: {exc}")


def _run_tools(server: Any, here: Here, allow_side_effects: bool, allow_answer: bool) -> None:
    from mcp_types import ToolAnnotations

    acts = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=True)

    @server.tool(annotations=acts, structured_output=True)
    @_answers
    async def run_plan(plan: str = "", inputs: dict[str, Any] | None = None, name: str = "plan.yaml",
                       task: str = "") -> RunAnswer:  # fmt: skip
        """Run a valid plan durably; or, given a `task` instead of a plan, have the configured model write the
        plan, streamed: a step that changes nothing starts as soon as its text is checked, the rest once the
        plan is whole. Unless the operator allowed side effects, a plan whose steps can act on the world
        (their tools, sub-plans, loops, a model's tools) stops first at a gate only a person answers: its id
        is in `waiting`. Every gate of a plan run from here is a person's to answer."""
        from . import RunError

        from .interpreter.ops.approval import acting_gated

        tools = here.tools()
        if task and not plan:
            config = here.project.config
            if not config.default_model:
                raise RunError.make("no-model", "run_plan with a task needs a model to write the plan",
                                        hint="set `model` in the server's dagplan.toml, or DAGPLAN_MODEL")  # fmt: skip
            written = await planning.aplan(task, tools=tools, run=True, stream=True, inputs=inputs or {},
                                      state_dir=here.state, config=config, on_run_created=here.mine.add,
                                      gate_acting=not allow_side_effects)  # fmt: skip
            return _run_json(written.run.to_json())
        if not plan:
            raise RunError.make("bad-argument", "run_plan needs a plan (its text) or a task to plan",
                                    hint="pass plan: the plan's YAML or JSON, or task: what to do")  # fmt: skip
        loaded = here.loaded(plan, name)
        if not allow_side_effects:
            loaded = acting_gated(loaded, tools)
        loaded = here.as_sent(loaded)
        result = await here.project.arun(loaded, tools=tools, inputs=inputs or {}, durable=True, person_gates=True,
                                         on_run_created=here.mine.add)  # fmt: skip
        return _run_json(result.to_json())

    @server.tool(annotations=acts, structured_output=True)
    @_answers
    async def resume_run(run_id: str) -> RunAnswer:
        """Go on with a run this server started, once a person has answered the gate it waits at."""
        result = await here.project.aresume(here.own(run_id))
        return _run_json(result.to_json())

    if allow_answer:

        @server.tool(annotations=acts, structured_output=True)
        @_answers
        async def answer_gate(run_id: str, step: str, value: Any, ctx: Context) -> RunAnswer:
            """Answer a gate of a run this server started (one of its choices), then go on with the run. A gate
            only a person may answer (every gate of a plan run from here, and the side-effect gate) refuses."""
            params = ctx.session.client_params
            who = params.client_info.name if params is not None and params.client_info is not None else None
            here.project.answer(here.own(run_id), step, value, channel="mcp", who=who or "an MCP client")
            result = await here.project.aresume(run_id)
            return _run_json(result.to_json())

    @server.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=True)
    @_answers
    def run_status(run_id: str) -> RunAnswer:
        """Where a run stands: its status, each step's status and output, what it waits for."""
        return _run_json(here.project.run_report(run_id).to_json())


def _resources(server: Any, here: Here) -> None:
    @server.resource("dagplan://schema/plan", mime_type="application/schema+json")
    def plan_schema() -> str:
        """The plan JSON Schema (every key, its type and description)."""
        from . import plan_schema as schema

        return json.dumps(schema(), indent=2)

    @server.resource("dagplan://reference", mime_type="text/markdown")
    def reference() -> str:
        """The plan language in one page: step kinds, references, placeholders, conditions."""
        return REFERENCE

    @server.resource("dagplan://examples", mime_type="application/json")
    def examples() -> str:
        """Example plans, by file name."""
        return json.dumps(EXAMPLES, indent=2)

    @server.prompt()
    def write_plan(task: str) -> str:
        """Teach a model to write a dagplan plan for a task with the tools at hand."""
        lines = [f"- {s.name}({', '.join((s.parameters or {}).get('properties', {}))}): "
                 f"{s.description.splitlines()[0] if s.description else ''} [{s.purity or 'undeclared'}]"
                 for s in here.project.catalog()]  # fmt: skip
        tools = "\n".join(lines) or "(none: only llm and gate steps)"
        return (
            f"{REFERENCE}\n## The tools at hand\n{tools}\n\n## The task\n{task}\n\n"
            "Write the plan as YAML. Call check_plan with it and repair every error until `valid` is true; "
            "then preview_plan, and run_plan if you may."
        )


def _run_json(report: dict) -> RunAnswer:
    """A run as a client sees it: a view like any other, so the project's secrets are masked (the journal
    keeps the values whole for resume)."""
    from .views import shown

    keep = ("run_id", "status", "message", "result", "steps", "waiting", "had_errors")
    out: Any = _plain(shown({k: report[k] for k in keep if k in report}))
    out.setdefault("run_id", report.get("id", ""))
    return out


def _plain(value: Any) -> Any:
    """A value as plain JSON (read-only mappings of the IR, tuples): what structured content carries."""
    return json.loads(json.dumps(value, default=lambda v: dict(v) if hasattr(v, "keys") else str(v)))


def serve(allow_run: bool = False, allow_side_effects: bool = False, http: int | None = None,
          allow_hosts: tuple[str, ...] = (), allow_answer: bool = False, token: str | None = None,
          tool_sources: tuple[str, ...] = (), state: Any = None) -> None:  # fmt: skip
    """Serve over stdio, or over streamable HTTP on loopback port ``http`` (Host and Origin checked, and
    every request carrying ``Authorization: Bearer TOKEN``)."""
    server = build(allow_run, allow_side_effects, state, allow_answer=allow_answer, tool_sources=tool_sources)
    if http is None:
        from .framing import serve_mcp_stdio

        serve_mcp_stdio(server)
        return
    import uvicorn

    from mcp.server.transport_security import TransportSecuritySettings

    hosts = [f"127.0.0.1:{http}", f"localhost:{http}", f"[::1]:{http}", *allow_hosts]
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=hosts,
        allowed_origins=[f"http://{h}" for h in hosts],
    )
    app = server.streamable_http_app(transport_security=security, host="127.0.0.1")
    assert token, "an HTTP server always has a token"
    config = uvicorn.Config(_bearer(app, token), host="127.0.0.1", port=http, log_level="warning", lifespan="on")
    uvicorn.Server(config).run()


def _bearer(app: Any, token: str) -> Any:
    """``app`` behind a bearer token (compared in constant time): any other local process is refused."""
    import hmac

    expected = f"Bearer {token}".encode()

    async def guarded(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or ()).get(b"authorization", b"")
            if not hmac.compare_digest(given, expected):
                body = b"a token is needed: Authorization: Bearer TOKEN (dagplan mcp printed it when it started)"
                headers = [(b"content-type", b"text/plain"), (b"www-authenticate", b"Bearer")]
                await send({"type": "http.response.start", "status": 401, "headers": headers})
                await send({"type": "http.response.body", "body": body})
                return
        await app(scope, receive, send)

    return guarded
