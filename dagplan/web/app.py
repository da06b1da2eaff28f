"""``dagplan serve``: the run viewer, a Starlette app whose pages are jinja2 templates in this package.

Every page and action goes through the public API (:mod:`dagplan.api`), as the CLI does: the runs
list (``runs``), a run's report and plan (``run_report``, ``stored_plan``), live updates tailing its
journal (``watch``: server-sent events, one message per journaled event), answering a gate
(``answer``, then ``resume`` in the background), ``discard``, and a plan file's ``check`` and
``preview`` (and running it once approved). Nothing is loaded from a CDN and nothing is built.

Safety: it binds 127.0.0.1 unless told otherwise; every request carries a token (printed once in the
start-up URL, as Jupyter does, then kept in a cookie), even on the loopback; a request whose ``Host`` is not
one the server was started for is refused (421: a page that re-resolves its own name to 127.0.0.1, DNS
rebinding, is not same-origin with the viewer); a change is a POST from the viewer's own origin
(``Origin`` / ``Sec-Fetch-Site``) with the page's CSRF token, and a body over :data:`MAX_BODY` is refused
(413) before it is read; jinja2 escapes everything a plan, a tool or a model wrote (the SVG is built with
escaped text); a run id must be one (the registry refuses paths); a plan file must be under the working
directory, and a GET never imports code (a plan test file, which names tools to import, is not shown).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import os
import secrets
import threading
import time
from datetime import datetime
from typing import Any, Callable, Mapping
from urllib.parse import urlencode

import dagplan

from .. import api

from .. import _doors
from ..dsl.errors import DagplanError, printable
from ..dsl.jsontext import loads
from ..views import reused_text, shown, trace_lines, where

MAX_BODY = 1024 * 1024  # bytes of a request body (a form: an answer, inputs); larger is refused unread
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]", "::1")
OUTPUT_HEAD = 2000  # characters of an output shown in the page (the rest streams from its own URL)
LOG_LINES = 1000
POLL = 0.03  # seconds between two looks at a journal while a page listens


class Viewer:
    """The app's state: where runs live, the token, the CSRF secret, the tools runs started here get."""

    def __init__(
        self,
        state_dir: Any = None,
        *,
        token: str | None = None,
        root: str | os.PathLike | None = None,
        tools: Mapping[str, Any] | None = None,
        tool_sources: tuple[str, ...] = (),
        hosts: tuple[str, ...] = (),
        project: Any = None,
    ):
        from ..project import Project

        # the project, built as every door builds it (configuration, state, tools); `root`: the folder whose
        # plan files the page may open (the working directory)
        self.project = project or Project(root, state=state_dir, tool_sources=tool_sources,
                                          tools=dict(tools) if tools else None)  # fmt: skip
        self.state_dir = self.project.state
        self.token = token
        self.hosts = frozenset(h.lower() for h in (*LOOPBACK_NAMES, *hosts))  # the names requests may use
        self.root = os.path.realpath(root or os.getcwd())
        self.csrf = hmac.new(secrets.token_bytes(32), b"csrf", "sha256").hexdigest()
        # Who answered from here, as a gate's answer records it: the token's id, never the token.
        self.token_id = "viewer " + (hashlib.sha256(token.encode()).hexdigest()[:12] if token else "(no token)")
        self.notices: dict[str, str] = {}  # run id -> what the last background action said
        self.plans: dict[str, Any] = {}  # run id -> its parsed plan
        self.config = self.project.config
        self.app = self._build()

    @property
    def tools(self) -> dict:
        return self.project.tools or {}

    # --- the app ---

    def _build(self) -> Any:
        from jinja2 import Environment, PackageLoader, select_autoescape
        from starlette.applications import Starlette
        from starlette.middleware import Middleware
        from starlette.routing import Route

        self.templates = Environment(
            loader=PackageLoader("dagplan.web", "templates"), autoescape=select_autoescape(["html"])
        )
        self.templates.globals["url"] = self.url
        routes = [
            Route("/", self.runs_page),
            Route("/runs/{run_id}", self.run_page),
            Route("/runs/{run_id}/stream", self.stream),
            Route("/runs/{run_id}/steps/{step}/output", self.output),
            Route("/runs/{run_id}/answer", self.answer, methods=["POST"]),
            Route("/runs/{run_id}/resume", self.resume, methods=["POST"]),
            Route("/runs/{run_id}/discard", self.discard, methods=["POST"]),
            Route("/plan", self.plan_page),
            Route("/plan/run", self.run_plan, methods=["POST"]),
        ]
        middleware = [Middleware(_Secrets, viewer=self), Middleware(_Guard, viewer=self)]
        return Starlette(routes=routes, middleware=middleware, exception_handlers={DagplanError: self._error})

    def url(self, path: str, **query: Any) -> str:
        query = {k: v for k, v in query.items() if v is not None}
        return path + ("?" + urlencode(query) if query else "")

    def _page(self, name: str, http_status: int = 200, **context: Any) -> Any:
        from starlette.responses import HTMLResponse

        html = self.templates.get_template(name).render(
            state_dir=_doors.shown_state(self.state_dir), csrf=self.csrf, token=self.token, **context
        )
        html = printable(html)  # a lone surrogate or a bidi override in a run's values: shown as its escape
        return HTMLResponse(html, status_code=http_status)

    async def _error(self, request: Any, exc: Exception) -> Any:
        from starlette.responses import PlainTextResponse

        assert isinstance(exc, DagplanError)
        text = "\n".join(d.format() for d in exc.diagnostics)
        unknown = exc.headline.code in ("unknown-run", "ambiguous-run", "no-output", "io", "not-found")
        return PlainTextResponse(text, status_code=404 if unknown else 400)

    # --- pages ---

    async def runs_page(self, request: Any) -> Any:
        from ..interpreter.core.vocabulary import RunStatus

        status = request.query_params.get("status") or None
        found = await asyncio.to_thread(self.project.runs)
        rows = [{**_run_row(r), "plan_file": self._plan_file(r.plan_name)} for r in found]
        waiting = sum(1 for r in rows if r["status"] == RunStatus.WAITING)
        if status:
            rows = [r for r in rows if r["status"] == status]
        statuses = [str(s) for s in RunStatus if s is not RunStatus.DISCARDED]
        return self._page("runs.html", runs=rows, status=status, statuses=statuses, waiting=waiting)

    async def run_page(self, request: Any) -> Any:
        run_id = request.path_params["run_id"]
        wanted = [t for t in request.query_params.getlist("type") if t] or None  # repeatable, as --filter
        context = await asyncio.to_thread(self._run_context, run_id, wanted)
        return self._page("run.html", **context)

    def _run_context(self, run_id: str, wanted: list[str] | None) -> dict[str, Any]:
        from ..interpreter.core.progress import top_step
        from ..render import render_svg
        from ..dsl.schedule import analysis_of
        from ..views import event_text

        watch = self.project.watch(run_id)
        events = watch.poll()  # first: the report is then at least as new as these, and the page's stream
        report = watch.report()  # starts after them (a report older than the log left its status stale)
        plan = self._plan_of(watch)
        statuses = {sid: str(row.status) for sid, row in report.steps.items()}
        graph = render_svg(plan, analysis_of(plan), statuses) if plan is not None else ""
        by_step: dict[str, list] = {}
        for event in events:
            if event.step is not None:
                by_step.setdefault(event.step, []).append(event)
        children: dict[str, list] = {}
        for cid, child in report.children.items():
            children.setdefault(top_step(cid), []).append((cid, child))
        steps = [
            _step_panel(sid, row, plan, by_step.get(sid, ()), children.get(sid, ()))
            for sid, row in report.steps.items()
        ]
        types = sorted({str(e.type) for e in events})
        log = [event_text(e) for e in [e for e in events if wanted is None or str(e.type) in wanted][-LOG_LINES:]]
        shown = report.shown_status
        return {
            "run": report,
            "shown_status": shown,
            "status_class": "errors" if shown != str(report.status) else report.status,
            "plan_file": self._plan_file(report.plan),
            "graph": graph,
            "steps": steps,
            "log": log,
            "types": wanted or [],
            "event_types": types,
            "cursor": watch.cursor,
            "can_resume": not report.status.finished and not _live(report),
            "notice": self.notices.pop(report.run_id, None),
        }

    def _plan_of(self, watch: Any) -> Any:
        """A run's plan, parsed once per run (its artifact never changes); None if it no longer checks."""
        found = self.plans.get(watch.run_id)
        if found is None:
            try:
                found = watch.plan(self.config)
            except DagplanError:
                return None
            if len(self.plans) >= 64:
                self.plans.pop(next(iter(self.plans)))
            self.plans[watch.run_id] = found
        return found

    async def stream(self, request: Any) -> Any:
        """Server-sent events: one message per event journaled after the page's cursor."""
        from starlette.responses import StreamingResponse

        run_id = request.path_params["run_id"]
        watch = await asyncio.to_thread(self.project.watch, run_id)
        cursor = request.query_params.get("cursor") or ""
        watch.cursor = int(cursor) if cursor.isdigit() and len(cursor) <= 18 else None  # an offset, a seq

        async def messages():
            beat = time.monotonic()
            while not await request.is_disconnected():
                found = watch.poll()
                for event in found:
                    yield f"data: {json.dumps(_update(event), default=str)}\n\n"
                if found:
                    beat = time.monotonic()
                    continue
                if time.monotonic() - beat > 10:
                    beat = time.monotonic()
                    yield ": still here\n\n"
                await asyncio.sleep(POLL)

        headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        return StreamingResponse(messages(), media_type="text/event-stream", headers=headers)

    async def output(self, request: Any) -> Any:
        """A step's whole output, streamed in chunks (a spilled output is never loaded whole)."""
        from starlette.responses import StreamingResponse

        run_id, step = request.path_params["run_id"], request.path_params["step"]
        chunks = await asyncio.to_thread(self.project.output_chunks, run_id, step)
        return StreamingResponse(chunks, media_type="text/plain; charset=utf-8")

    async def plan_page(self, request: Any) -> Any:
        from ..render import render_svg, render_text
        from ..views import preview_text

        file = request.query_params.get("file") or ""
        path = self._plan_path(file)
        # checked with the tools the server was given (`serve --tools`), as `check --tools` would
        (result,) = await asyncio.to_thread(self.project.check, [path])
        diagnostics = [{"severity": d.severity, "text": text} for d, text in _diagnostic_texts(result, render_text)]
        preview = graph = None
        text, fields = "", []
        if result.plan is not None and result.analysis is not None:
            graph = render_svg(result.plan, result.analysis)
        if result.ok and result.plan is not None:
            preview = self.project.preview(result.plan)
            text = preview_text(preview)
            fields = _input_fields(result.plan)
        return self._page(
            "plan.html",
            file=file,
            diagnostics=diagnostics,
            graph=graph,
            preview=preview,
            preview_text=text,
            runnable=result.ok,
            fields=fields,
        )

    # --- actions (POST, CSRF-checked by the guard) ---

    async def answer(self, request: Any) -> Any:
        run_id = request.path_params["run_id"]
        form = await request.form()
        step, value = str(form.get("step") or ""), str(form.get("value") or "")
        await asyncio.to_thread(lambda: self.project.answer(run_id, step, value, text=True, channel="viewer",
                                                   who=self.token_id))  # fmt: skip
        self._in_background(run_id, lambda: self._resume(run_id))
        return self._redirect(self.url(f"/runs/{run_id}"))

    async def resume(self, request: Any) -> Any:
        run_id = request.path_params["run_id"]
        await asyncio.to_thread(self.project.run_report, run_id)  # an unknown run is a 404 now
        self._in_background(run_id, lambda: self._resume(run_id))
        return self._redirect(self.url(f"/runs/{run_id}"))

    async def discard(self, request: Any) -> Any:
        await asyncio.to_thread(self.project.discard, request.path_params["run_id"])
        return self._redirect(self.url("/"))

    async def run_plan(self, request: Any) -> Any:
        """Run a plan file (a lazy one is approved by this request) durably, in the background."""
        from starlette.responses import PlainTextResponse

        form = await request.form()
        path = self._plan_path(str(form.get("file") or ""))
        try:
            inputs = loads(str(form.get("inputs") or "{}") or "{}")
        except ValueError as exc:  # jsontext.TooDeep too
            return PlainTextResponse(f"inputs are not JSON: {exc}", status_code=400)
        if not isinstance(inputs, dict):
            return PlainTextResponse("inputs are a JSON object: {name: value}", status_code=400)
        typed = [f"{k[len('input.') :]}={v}" for k, v in form.multi_items() if k.startswith("input.") and str(v)]
        if typed:  # the form's fields, one per input: an empty one is not given (its default applies)
            try:
                plan = await asyncio.to_thread(self.project.load, path)
                inputs.update(_doors.parse_assignments(typed, plan))
            except DagplanError as exc:
                return PlainTextResponse("\n".join(d.format() for d in exc.diagnostics), status_code=400)
            except RecursionError:
                return PlainTextResponse("inputs nest too deep", status_code=400)
        started: dict[str, str] = {}
        ready = threading.Event()

        def created(run_id: str) -> None:
            started["id"] = run_id
            ready.set()

        def go() -> None:
            try:
                self.project.run(path, inputs=inputs, durable=True, approve=lambda _preview: True,
                                 on_run_created=created)  # fmt: skip
            finally:
                ready.set()

        errors = self._in_background(None, go)
        await asyncio.to_thread(ready.wait, 10)
        if "id" not in started:
            return PlainTextResponse(errors.get("error", "the run did not start"), status_code=400)
        return self._redirect(self.url(f"/runs/{started['id']}"))

    # --- helpers ---

    def _resume(self, run_id: str) -> None:
        sources, _changed = _doors.resume_tools(run_id, self.state_dir)
        tools = dagplan.load_tools(sources) if sources else self.tools
        self.project.resume(run_id, tools=tools)

    def _in_background(self, run_id: str | None, work: Callable[[], None]) -> dict[str, str]:
        """Run ``work`` in a thread; what it raises becomes the run page's notice."""
        errors: dict[str, str] = {}

        def run() -> None:
            try:
                work()
            except DagplanError as exc:
                errors["error"] = "\n".join(d.format() for d in exc.diagnostics)
                if run_id:
                    self.notices[run_id] = errors["error"]
            except Exception as exc:  # noqa: BLE001 - a tool's crash is the run's, shown not raised
                errors["error"] = f"{type(exc).__name__}: {exc}"
                if run_id:
                    self.notices[run_id] = errors["error"]

        threading.Thread(target=run, name="dagplan-serve-run", daemon=True).start()
        return errors

    def _plan_path(self, file: str) -> str:
        """A plan file named by a request: a file under the working directory, else 403."""
        from starlette.exceptions import HTTPException

        if not file or "\0" in file:
            raise HTTPException(400, "name a plan file: /plan?file=PATH")
        full = os.path.realpath(os.path.join(self.root, file))
        if os.path.commonpath([full, self.root]) != self.root:
            raise HTTPException(403, f"{file!r} is not a file under {self.root}")
        if full.endswith(api.TEST_SUFFIXES):  # checking one would import the tools it names
            raise HTTPException(403, f"{file!r} is a plan test file: run it with dagplan test")
        if not os.path.isfile(full):
            raise HTTPException(404, f"no plan file {file!r}")
        return full

    def _plan_file(self, name: str) -> str | None:
        """A run's plan as the plan page names it (relative to the served folder), None when it is not a
        file there (moved, elsewhere, inline)."""
        full = os.path.realpath(os.path.join(self.root, name))
        if os.path.commonpath([full, self.root]) != self.root or not os.path.isfile(full):
            return None
        return os.path.relpath(full, self.root)

    def _redirect(self, url: str) -> Any:
        from starlette.responses import RedirectResponse

        return RedirectResponse(url, status_code=303)


class _Secrets:
    """Every request is answered under the viewer's project's secrets (:meth:`Project.secrets`): what its pages
    and streams show is masked by this project's ``redact`` patterns, whatever else the process serves."""

    def __init__(self, app: Any, viewer: Viewer):
        self.app, self.viewer = app, viewer

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        with self.viewer.project.secrets():
            await self.app(scope, receive, send)


class _Guard:
    """Every request: a ``Host`` the server was started for, the token; every POST: the viewer's own
    origin, a body of at most :data:`MAX_BODY` bytes, the CSRF token."""

    def __init__(self, app: Any, viewer: Viewer):
        self.app, self.viewer = app, viewer

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        from starlette.requests import Request
        from starlette.responses import PlainTextResponse

        request = Request(scope, receive)
        refusal = self._refusal(request)
        if refusal is None and request.method == "POST":
            body = await _body(request, MAX_BODY)
            if body is None:
                refusal = (413, f"the request body is over {MAX_BODY:,} bytes")
            else:
                try:
                    form = await Request(scope, _replay_body(body)).form()
                except Exception:  # noqa: BLE001 - a body that is not the form its content-type says
                    form = None
                if form is None:
                    refusal = (400, "the request body is not a readable form")
                elif not _same(str(form.get("csrf") or ""), self.viewer.csrf):
                    refusal = (403, "the form is stale or forged (CSRF token)")
                receive = _replay_body(body)
        if refusal is not None:
            await PlainTextResponse(refusal[1], refusal[0])(scope, receive, send)
            return
        token, given = self.viewer.token, request.query_params.get("token")

        async def send_with_cookie(message: Any) -> None:
            if message["type"] == "http.response.start" and token is not None and given:
                headers = list(message.get("headers", []))
                cookie = f"dagplan_token={token}; HttpOnly; SameSite=Strict; Path=/"
                headers.append((b"set-cookie", cookie.encode()))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_cookie)

    def _refusal(self, request: Any) -> tuple[int, str] | None:
        """Why a request is refused (status, text), or None: its Host, its token, a POST's origin."""
        host = request.headers.get("host", "").lower()
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        if name not in self.viewer.hosts:
            return 421, "this server answers only to the names it was started for (dagplan serve --allow-host NAME)"
        token = self.viewer.token
        if token is not None:
            auth = request.headers.get("authorization", "")
            given = request.query_params.get("token")
            carried = given or request.cookies.get("dagplan_token") or auth.removeprefix("Bearer ").strip()
            if not carried or not _same(carried, token):
                return 401, "a token is required: open the URL dagplan serve printed"
        if request.method == "POST":
            origin = request.headers.get("origin")
            site = request.headers.get("sec-fetch-site")
            if site is not None and site not in ("same-origin", "none"):
                return 403, "a change must come from the viewer's own pages"
            if origin is not None and origin.lower() not in (f"http://{host}", f"https://{host}"):
                return 403, "a change must come from the viewer's own pages"
        return None


def _same(given: str, expected: str) -> bool:
    """A constant-time comparison of a secret that never fails on what a request sent (non-ASCII too)."""
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"), expected.encode("utf-8"))


async def _body(request: Any, limit: int) -> bytes | None:
    """The request's body, or None when it is (or says it is) over ``limit`` bytes: read in chunks, never whole."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return None
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _replay_body(body: bytes) -> Callable[[], Any]:
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return receive


# --- what the pages show ------------------------------------------------------------------------


def _run_row(info: Any) -> dict[str, Any]:
    usage = info.usage or {}
    end = info.finished or (time.time() if info.status is info.status.RUNNING else None)
    return {
        "id": info.id,
        "status": str(info.status),
        "shown": info.shown_status,
        "css": "errors" if info.shown_status != str(info.status) else str(info.status),
        "plan": info.plan_name,
        "done": info.done,
        "total": info.total,
        "started": datetime.fromtimestamp(info.started).strftime("%Y-%m-%d %H:%M:%S"),
        "duration": _seconds(end - info.started) if end else "",
        "tokens": (usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0)) or "",
        "cost": f"${usage['cost']:.4f}" if usage.get("cost") else "",
        "waiting": [w.get("step") for w in info.waiting],
    }


def _live(report: Any) -> bool:
    return bool(report.status is report.status.RUNNING)


def _seconds(s: float) -> str:
    return f"{s * 1000:.0f} ms" if s < 1 else f"{s:.1f} s" if s < 120 else f"{s / 60:.1f} min"


def _step_panel(sid: str, row: Any, plan: Any, events: Any, children: Any) -> dict[str, Any]:
    from ..interpreter.core.vocabulary import EventType  # the typed values, as the CLI renderers use them

    step = plan.by_id.get(sid) if plan is not None else None
    args, errors, usage, prompt, printed = None, [], None, None, ""
    for e in events:
        if e.type is EventType.STEP_PRINTED:
            printed += str(e.data.get("text", ""))
        elif e.type is EventType.PROMPT_RESOLVED:
            prompt = prompt_pieces(e.data.get("prompt") or "", e.data.get("spans") or ())
        elif e.type is EventType.TOOL_CALLED:
            args = json.dumps(e.data.get("args"), indent=1, ensure_ascii=False, default=str)
        elif e.type in (EventType.STEP_RETRYING, EventType.STEP_FAILED) and e.data.get("error"):
            err = e.data["error"]
            trace = e.data.get("traceback")
            errors.append(
                {
                    "attempt": e.data.get("attempt") or e.data.get("attempts"),
                    "text": f"{err.get('type')}: {err.get('message')}",
                    "trace": "\n".join(trace_lines(trace)) if trace else None,
                    "where": where(trace) if trace else None,
                }
            )
        elif e.type is EventType.STEP_COMPLETED and e.data.get("usage"):
            u = e.data["usage"]
            tokens = f"{u.get('prompt_tokens', 0)}+{u.get('completion_tokens', 0)} tokens"
            usage = f"{u.get('model', '')} {tokens}, ${u.get('cost', 0):.4f}"
    output, more = None, False
    if row.status.has_output and row.output is not None:
        value = shown(row.output)  # secrets masked on a page (the journal keeps the value)
        text = value if isinstance(value, str) else json.dumps(value, indent=1, ensure_ascii=False, default=str)
        output, more = text[:OUTPUT_HEAD], len(text) > OUTPUT_HEAD or row.spilled
    folded = [{"id": cid, "status": str(c.status), "error": (c.error or {}).get("message")} for cid, c in children]
    return {
        "id": sid,
        "status": str(row.status),
        "kind": (step.tool or str(step.kind)) if step is not None else "",
        "description": step.description if step is not None else "",
        "attempts": row.attempts,
        "duration": _seconds(row.duration) if row.duration else "",
        "args": args,
        "output": output,
        "more": more,
        "errors": errors,
        "usage": usage,
        "children": folded,
        "prompt": prompt,
        "printed": printed[-OUTPUT_HEAD:] or None,
        "reused": reused_text(row.reused) if getattr(row, "reused", None) else None,
    }


def prompt_pieces(text: str, spans: Any) -> list[dict[str, Any]]:
    """A resolved prompt cut into plain text and marked parts, each marked part saying where it came from
    (the step panel highlights one on hover, its source in the title)."""
    pieces: list[dict[str, Any]] = []
    at = 0
    for number, span in enumerate(sorted(spans, key=lambda s: s["start"]), 1):
        if span["start"] > at:
            pieces.append({"text": text[at : span["start"]]})
        origin = ("the plan's default" if span.get("default") else f"step {span['step']}" if span.get("step")
                  else f"input {span['input']}" if span.get("input") else "the initial state")  # fmt: skip
        pieces.append({"text": text[span["start"] : span["end"]], "n": number, "source": span.get("source", ""),
                       "origin": origin})  # fmt: skip
        at = span["end"]
    if at < len(text):
        pieces.append({"text": text[at:]})
    return pieces


def _run_statuses() -> dict:
    from ..interpreter.core.vocabulary import STOPPED, EventType as E, RunStatus as R

    return {E.PLAN_STARTED: R.RUNNING, E.PLAN_RESUMED: R.RUNNING, **STOPPED}


def _update(event: Any) -> dict[str, Any]:
    """What the run page needs of one event: the node's new status, the run's, a log line."""
    from ..interpreter.core.vocabulary import EventType, step_status_after
    from ..views import event_text

    run_status = _run_statuses()
    out: dict[str, Any] = {"type": str(event.type), "line": event_text(event)}
    step = event.step
    if step is not None and "[" not in step and "." not in step:
        status = step_status_after(event.type, event.data)
        if status:
            out.update(node=step, status=str(status))
        if event.type is EventType.STEP_WAITING:
            out["request"] = event.data.get("request")
    if event.type in run_status:
        out["run_status"] = str(run_status[event.type])
    if event.type is EventType.PLAN_COMPLETED:
        out.update(run_status=str(event.data.get("status", "completed")), reload=True)
    return out


def _diagnostic_texts(result: Any, render_text: Callable) -> list[tuple[Any, str]]:
    return [(d, render_text([_only(result, d)]).rstrip()) for d in result.diagnostics]


def _only(result: Any, diagnostic: Any) -> Any:
    from dataclasses import replace

    return replace(result, diagnostics=(diagnostic,))


def _input_fields(plan: Any) -> list[dict[str, Any]]:
    """One form field per input of the plan: a required one is empty and must be filled (never a made-up
    value a run would start with); an optional one shows its default."""
    fields = []
    for name, schema in (plan.inputs or {}).items():
        schema = schema if isinstance(schema, Mapping) else {}
        kind = str(schema.get("type") or "any")
        default = schema.get("default")
        value = "" if "default" not in schema else default if isinstance(default, str) else json.dumps(default)
        hint = "text" if kind == "string" else f"{kind}, as JSON" if kind in ("object", "array", "any") else kind
        fields.append({"name": name, "required": name in plan.required_inputs, "value": value, "type": hint,
                       "description": str(schema.get("description") or "")})  # fmt: skip
    return fields
