"""``dagplan.Project``: one project's context, built once, and the API's implementation.

A project is a folder: its configuration (``dagplan.toml``, found by the one discovery rule, which stops at
the project's root), where its runs are kept (the one precedence: given, ``$DAGPLAN_STATE``,
``$DAGPLAN_STATE_DIR``, the configuration's ``state``, ``./.dagplan``), its tools (the configuration's
sources and the ones given, loaded once, on first use) and its secrets (the configuration's ``redact``
patterns: what it shows and records is masked by its own patterns, never by another project's). Its methods
hold the API's bodies; what varies per call (a plan, inputs, a run id) is all they take. ``with_options``
gives a new project with other settings: a project never changes.

    project = dagplan.Project("path/to/project")
    result = project.run("plans/refund.yaml", inputs={"amount": 50})
    project.runs()

The module-level functions (``dagplan.run``, ``dagplan.runs``...) are these methods of :meth:`Project.given`:
the working directory's project, with the context a call gave (``state_dir``, ``config``, ``tool_sources``:
shorthands for ``Project(state=..., config=..., tool_sources=...)``). Nothing outside this class reads the
configuration, merges tool sources or picks where runs are kept (``tests/test_front_door.py`` walks the
source for it).
"""

from __future__ import annotations

import functools
import os
from functools import cached_property
from typing import Any, Callable, Iterable, Mapping

from . import _pipeline as pipeline

_OWN: Any = object()  # a method's tools not given: the project's


def _own_secrets(method: Callable) -> Callable:
    """The method runs under its project's ``redact`` patterns (core/redact.project_patterns): what it reads
    back, shows or writes is masked by this project's secrets, whatever another project in the process holds."""

    @functools.wraps(method)
    def under(self: "Project", *args: Any, **kwargs: Any) -> Any:
        with self.secrets():
            return method(self, *args, **kwargs)

    return under


def placed_here(source: Any) -> str:
    """A tool source as a command line or a call gives it: a file (a .py or a catalog) relative to the working
    directory, made absolute; a module name or ``mcp:NAME`` as it is."""
    from .interpreter.core.config import names_a_file

    text = os.fspath(source)
    return os.path.abspath(text) if names_a_file(text) else text


class Project:
    """One project's context, built once: its configuration, where its runs are kept, its tools, its secrets
    and its runs' settings; its methods are the API (see the module doc)."""

    def __init__(self, root: str | os.PathLike | None = None, *, state: Any = None, tool_sources: Iterable[str] = (),
                 tools: Any = None, config: Any = None, **settings: Any) -> None:  # fmt: skip
        from .interpreter.core.config import names_a_file, project_root

        if root is None and config is not None and getattr(config, "path", None):
            root = config.path.parent  # a configuration given: its project
        self.root = project_root(root)
        self._given_state = state
        self._given_config = config
        # a tool file given relative is the project's (as `tools = [...]` of its configuration is)
        self.tool_sources = tuple(str(self.root / s) if names_a_file(s) and not os.path.isabs(s) else s
                                  for s in map(os.fspath, tool_sources))  # fmt: skip
        self._given_tools = tools
        self._once = False  # a long-lived project reads its configuration again when the file changed
        self._read: Any = None  # ...a project for one call, once
        # every run's settings (model, max_cost, subscribers...), refused by the rule arun's are
        self.settings: Mapping[str, Any] = {}
        if settings:  # (the holder's names are read only then: `check` never imports it)
            self.settings = pipeline.options_of("Project", settings, pipeline.settings_names())

    @classmethod
    def default(cls) -> "Project":
        """The working directory's project."""
        return cls()

    @classmethod
    def given(cls, config: Any = None, state: Any = None, tool_sources: Iterable[str] = (), tools: Any = None,
              ) -> "Project":  # fmt: skip
        """What a module-level function means: the working directory's project, with the context the call gave
        (its tool files relative to the working directory, as a command line's are)."""
        sources = [placed_here(s) if os.path.exists(s) else os.fspath(s) for s in tool_sources]
        here = cls(state=state, tool_sources=sources, tools=tools, config=config)
        here._once = True  # a project for one call: its configuration is read once, at the first ask
        return here

    @classmethod
    def of_file(cls, path: str | os.PathLike, **given: Any) -> "Project":
        """The project a file belongs to (its folder's, by the one discovery rule), wherever the caller
        stands: a plan test collected by pytest from a parent folder, a document an editor opened."""
        return cls(os.path.dirname(os.path.abspath(path)), **given)

    def with_options(self, *, state: Any = None, tool_sources: Iterable[str] | None = None, tools: Any = None,
                     **settings: Any) -> "Project":  # fmt: skip
        """A new project: this one with another state location, more tool sources, tools given, or other
        settings for its runs (the fields of :class:`dagplan.RunSettings`, by name: ``model``, ``max_cost``,
        ``max_concurrency``, ``subscribers``...)."""
        return Project(self.root, state=state if state is not None else self._given_state,
                       tool_sources=self.tool_sources if tool_sources is None else (*self.tool_sources, *tool_sources),
                       tools=tools if tools is not None else self._given_tools, config=self._given_config,
                       **{**self.settings, **settings})  # fmt: skip

    @property
    def run_settings(self) -> Any:
        """Its runs' settings as one :class:`dagplan.RunSettings` (:attr:`settings`: those given, by name)."""
        from .settings import RunSettings

        return RunSettings(**self.settings)

    # --- the context, each part by its one rule ---

    @property
    def config(self) -> Any:
        """Its configuration, as its file says now (read again only when the file changed: a language server or
        an MCP server that runs for hours sees an edited dagplan.toml); the one given, when one was."""
        if self._given_config is not None:
            return self._given_config
        from .interpreter.core.config import load_config

        if self._read is not None:
            return self._read
        found = load_config(self.root)
        if self._once:
            self._read = found
        return found

    @property
    def state(self) -> Any:
        """Where its runs are kept (the one rule of every door: interpreter/core/config.state_of)."""
        from .interpreter.core.config import state_of

        return state_of(self._given_state, self.config, self.root)

    @property
    def sources(self) -> list[str]:
        """Where its tools come from: the configuration's ``tools``, then the ones given (the one merge)."""
        return [*self.config.tools, *self.tool_sources]

    @cached_property
    def tools(self) -> dict | None:
        """Its tools, loaded once: the ones given, else those of :attr:`sources`; None when it knows none (tool
        names and arguments then go unchecked, and every door says so)."""
        from .interpreter.tools.catalog import registry

        if self._given_tools is not None:
            return registry(self._given_tools)
        from .interpreter.tools.sources import load_tools

        return load_tools(self.sources) if self.sources else None

    @property
    def tools_known(self) -> bool:
        """Whether tool names and arguments can be checked here (else every door says they were not)."""
        return self._given_tools is not None or bool(self.sources)

    @property
    def patterns(self) -> tuple[str, ...]:
        """Its secrets: the configuration's ``redact`` patterns (masked at every sink of this project's)."""
        return tuple(self.config.redact)

    def secrets(self) -> Any:
        """A context in which everything shown, recorded or returned is masked by this project's patterns (its
        runs' tasks and threads inherit it): every door of this project enters it."""
        from .interpreter.core.patterns import project_patterns

        return project_patterns(self.patterns)

    def use_secrets(self) -> None:
        """From here on in this context (a command's process, which serves this one project), everything shown,
        recorded or returned is masked by this project's patterns."""
        from .interpreter.core.patterns import use_patterns

        use_patterns(self.patterns)

    def _registry(self) -> Any:
        from .interpreter.stores.registry import open_registry

        return open_registry(self.state)

    def _plan(self, plan: Any, tools: Any = _OWN) -> Any:
        """A plan given as a path (relative to the working directory, else to the project) or text-free object:
        loaded against this project's tools (or those given)."""
        if isinstance(plan, os.PathLike) or (isinstance(plan, str) and "\n" not in plan):  # a path, not a text
            if not os.path.isabs(plan) and not os.path.exists(plan):
                plan = self.root / plan
        if not isinstance(plan, (str, os.PathLike)):
            return plan
        return pipeline.load_plan(plan, tools=self.tools if tools is _OWN else tools, config=self.config)

    # --- checking and looking ---

    def load(self, source: Any = None, *, text: Any = None, name: str | None = None,
             root: str | os.PathLike | None = None) -> Any:  # fmt: skip
        """:func:`dagplan.load` with this project's tools and budget."""
        return pipeline.load_plan(source, text=text, name=name, tools=self.tools, config=self.config, root=root)

    def check(self, paths: str | os.PathLike | Iterable[str | os.PathLike]) -> list:
        """``dagplan check`` of one file or several (a path alone is one file, never its characters): each checked
        as ``run`` will load it, with the same configuration (its tools, ``max_items``, ``max_steps``); a plan
        test file (``*.test.yaml``) is checked as one. RunError ``tools-import`` when the tools cannot load."""
        from .dsl.load import is_test_file

        if isinstance(paths, (str, os.PathLike)):
            paths = [paths]
        checking = self._checker()
        return [pipeline.check_tests(path, self.config) if is_test_file(path)
                else checking(path, name=os.fspath(path) if os.fspath(path) != "-" else None)
                for path in paths]  # fmt: skip

    def _checker(self) -> Callable[..., Any]:
        """One file's or text's ``check`` with this project's tools (their specs: no code runs), budget, rules."""
        specs = None
        if self.sources:  # importing user code (and the tool registry) only when there is some
            from .interpreter.tools.sources import load_tool_specs

            specs = load_tool_specs(self.sources)
        return pipeline.checker(self.config, specs)

    def check_text(self, text: str, name: str = "plan.yaml", *, test_file: bool = False,
                   root: str | os.PathLike | None = None) -> Any:  # fmt: skip
        """``check`` of a plan given as text (an editor's buffer, an agent's plan): the same rules, tools,
        budget, preflight warnings and cost as :meth:`check`. ``name`` says where the text belongs: its
        relative sub-plans are read beside it. The text is a plan whatever its name, unless ``test_file`` (an
        editor's own files): then a ``*.test.yaml`` name checks it as a plan test, which imports the tools
        it names, so never for text from an untrusted client. ``root``: the folder its sub-plan files must
        lie under."""
        from .dsl.load import is_test_file

        if test_file and is_test_file(name):
            from .interpreter.testing.plantest import check_suite

            return check_suite(name, self.config, text)
        return self._checker()(text=text, name=name, root=root)

    def format_document(self, document: Any, refs: bool = False) -> str:
        """``dagplan fmt`` of a loaded document (:func:`dagplan.format_document`) with this project's tools: a
        ReWOO text's ``Tool[text]`` goes to the parameter they name, as :meth:`check` and :meth:`run` read it
        (the tools are loaded only for such a text)."""
        from .dsl.fmt import format_document

        tools = self.tools if document.dialect == "rewoo" and self.tools_known else None
        return format_document(document, refs, {n: t.spec for n, t in tools.items()} if tools else None)

    def catalog(self) -> list:
        """The tools a plan may call here, as :class:`ToolSpec` values sorted by name (MCP servers' from the
        lock): what ``dagplan tools``, MCP's ``list_tools`` and the editor's completion show."""
        from .interpreter.tools.sources import load_tool_specs

        specs = load_tool_specs(self.sources)
        return [specs[name] for name in sorted(specs)]

    @_own_secrets
    def preview(self, plan: Any, tools: Any = _OWN) -> Any:
        """What the plan would run, running nothing: a :class:`Preview`; with tools (this project's, or those
        given, or only their specs: a planner's catalog), the steps that act and the destructive ones are
        marked."""
        from .dsl.ir import ToolSpec
        from .dsl.schedule import analysis_of
        from .interpreter.engine.preview import build_preview
        from .interpreter.tools.catalog import registry

        tools = self.tools if tools is _OWN else tools
        plan = self._plan(plan, tools)
        if isinstance(tools, Mapping) and tools and all(isinstance(t, ToolSpec) for t in tools.values()):
            return build_preview(plan, analysis_of(plan), self.config, tools)  # specs say enough
        return build_preview(plan, analysis_of(plan), self.config, registry(tools))

    def estimate(self, plan: Any) -> Any:
        """The worst case of a plan before it runs: steps, model calls, input tokens and dollars
        (:class:`Estimate`; ``.summary()``), priced with litellm's offline cost map."""
        from .interpreter.llm.estimate import estimate as worst

        cfg = self.config
        return worst(self._plan(plan, None), cfg.default_model, cfg.max_items, cfg.step_max_iterations)

    @_own_secrets
    def diff(self, old: Any, new: Any) -> Any:
        """``dagplan diff``: the semantic difference of two plans (:class:`dagplan.dsl.diff.PlanDiff`). A plan
        is a file, a loaded :class:`Plan`, or ``run:RUN_ID`` (the plan a recorded run runs). With LLM steps on
        either side, the worst-case cost before and after is priced."""
        from .dsl.diff import diff as semantic

        tools = self.tools

        def side(plan: Any) -> Any:
            if isinstance(plan, str) and plan.startswith("run:"):
                return self.stored_plan(plan[4:], None)
            return self._plan(plan)

        before, after = side(old), side(new)
        found = semantic(before, after, {name: tool.spec for name, tool in tools.items()} if tools else None)
        if found.same:
            return found
        from .interpreter.llm.preflight import llm_steps

        if llm_steps(before) or llm_steps(after):
            found.cost = tuple(self.estimate(p).summary(steps=False) or "no model calls" for p in (before, after))  # type: ignore[assignment]
        return found

    def approve(self, plan: Any, who: str | None = None) -> dict:
        """A person's approval of ``plan`` with this project's tools (``dagplan preview PLAN --approve``): its
        canonical hash, the tools' hash, the steps that can act, the worst-case cost, who approved it (by default
        the OS user) and when. :meth:`run` with ``approval=`` runs only this plan with these tools."""
        from .interpreter.core.vocabulary import os_user
        from .interpreter.ops.approval import make

        plan = self._plan(plan)
        return make(plan, self.tools or {}, who=who if who is not None else os_user(),
                    cost=self.estimate(plan).to_json())  # fmt: skip

    def check_approval(self, approval: Any, plan: Any) -> dict:
        """The approval (a file, or its data) when ``plan`` with this project's tools is what it approved; else
        the error ``not-approved``, each difference in ``dagplan diff``'s words."""
        from .dsl.errors import RunError
        from .interpreter.ops.approval import differences, read

        given = read(approval) if not isinstance(approval, Mapping) else dict(approval)
        found = differences(given, self._plan(plan), self.tools or {})
        if found:
            raise RunError.make("not-approved", "this is not the plan that was approved: " + "; ".join(found),
                                hint="run the approved plan, or have a person approve this one: "
                                     "dagplan preview PLAN --approve -o FILE")  # fmt: skip
        return given

    # --- running ---

    async def arun(self, plan: Any, *, settings: Any = None, **options: Any) -> Any:
        """Run a plan with this project's context and settings; ``options``: what varies per run (``inputs``,
        ``approve``, ``durable``, ``run_id``, ``reuse``, ``cassette``, ``approval``, ``on_run_created``,
        ``tools``) or a setting for this run only. See :func:`dagplan.arun`."""
        from .interpreter.engine.scope import Options
        from .interpreter.ops.driver import RunRequest, start
        from .interpreter.tools.catalog import registry
        from .interpreter.tools.sources import source_record

        given = {**self.settings, **(settings.given() if settings is not None else {})}
        taken = ("tools", "inputs", "approve", "durable", "run_id", "reuse", "cassette", "approval", "on_run_created")
        call = {k: options.pop(k) for k in taken if k in options}
        options = {**given, **pipeline.options_of("arun", options, pipeline.settings_names())}
        cfg = self.config
        model, ask_gate = options.pop("model", None), options.pop("ask_gate", None)
        recorded = pipeline.cassette_of(call.get("cassette"))
        tools = call.get("tools")
        sources = list(self.sources) if tools is None else list(self.tool_sources)  # what a resume loads
        if tools is None and self._given_tools is None and recorded is not None and not isinstance(plan, pipeline.Plan):
            from .interpreter.testing.cassette import replay_tools

            tools, sources = replay_tools(recorded[0]) or None, []  # a replay checks against the recorded catalog
        elif tools is None:
            tools = self.tools
        plan = self._plan(plan, tools)
        replay = pipeline.replaying(recorded, ask_gate, model or cfg.default_model, cfg)
        how = Options.from_config(
            cfg,
            model=replay.pop("model", model),
            ask_gate=replay.pop("ask_gate", ask_gate),
            reuse=self.reuse_of(call.get("reuse"), plan),
            **options,
            **replay,
        )
        durable, approval = call.get("durable", False), call.get("approval")
        if not durable and how.ask_gate is None and plan.gate_steps:
            durable = True  # it can stop at a gate: kept, so that answer() and resume() of its id find its work
        approve = call.get("approve")
        return await start(
            RunRequest(
                plan,
                registry(tools),
                how,
                inputs=call.get("inputs"),
                approve=approve if approval is None else (lambda preview: True),  # approved ahead, by a person
                durable=durable,
                state=self.state,
                run_id=call.get("run_id"),
                meta={
                    "tool_sources": source_record(sources),
                    "config": str(cfg.path) if cfg.path else None,
                    **({"approval": {k: approval.get(k) for k in pipeline.APPROVAL_KEPT}} if approval else {}),
                },  # fmt: skip
                on_run_created=call.get("on_run_created"),
            )
        )

    def run(self, plan: Any, **options: Any) -> Any:
        """Run a plan to the end: see :meth:`arun` and :func:`dagplan.run`."""
        return pipeline.sync(self.arun(plan, **options))

    def reuse_of(self, runs: Any, plan: Any = None) -> Any:
        """The completed results of ``runs`` (ids, ``@last``: the newest run of ``plan``, or a Reuse already) by
        step fingerprint; None for none. An id that names no run is the usual unknown-run error."""
        from .interpreter.engine.reuse import Reuse

        if runs is None or isinstance(runs, Reuse):
            return runs
        registry = self._registry()
        return Reuse.of(registry.open(run_id) for run_id in pipeline.runs_of_plan(registry, runs, plan))

    @_own_secrets
    def rerun(self, plan: Any, reuse: Any, tools: Any = _OWN, *, inputs: Mapping[str, Any] | None = None,
              model: str | None = None) -> Any:  # fmt: skip
        """What ``run(plan, reuse=...)`` would run again and why, calling nothing (a :class:`Rerun`: each step
        ``reuse`` or ``run`` with its reason, and the model calls it would make and save). ``inputs``: the
        first run's unless given; the tools as the run would have them (their code is part of a fingerprint)."""
        from .dsl.errors import DagplanError
        from .interpreter.engine.scope import Options
        from .interpreter.ops.rerun import would_rerun
        from .interpreter.tools.catalog import registry

        tools = self.tools if tools is _OWN or tools is None else tools
        plan = self._plan(plan, tools)
        runs = self._registry()
        journals = [runs.open(run_id) for run_id in pipeline.runs_of_plan(runs, reuse, plan)]
        try:
            before = self.stored_plan(journals[0].id, None) if journals else None
        except DagplanError:  # an agent's run, a streamed run that never got its plan: no fields to compare
            before = None
        options = Options.from_config(self.config, model=model)
        return pipeline.sync(would_rerun(plan, registry(tools), journals, options, inputs, before, self.config))

    async def aresume(self, run_id: str, *, settings: Any = None, tools: Any = _OWN, **options: Any) -> Any:
        """Resume a durable run of this project (see :func:`dagplan.aresume`), with the settings a resume can
        change (``model``, ``completion_kwargs``, ``max_concurrency``, ``on_limit_exceeded``, ``subscribers``,
        ``ask_gate``; the rest are the run's, kept from its start)."""
        from .interpreter.engine.scope import Options
        from .interpreter.ops.driver import ResumeRequest, resume as resumed
        from .interpreter.tools.catalog import registry

        taken = ("from_step", "on_interrupted", "rerun_side_effects", "adopted_output", "approve", "on_run_created")
        call = {k: options.pop(k) for k in taken if k in options}
        allowed = pipeline.settings_names(resume=True)
        kept = {k: v for k, v in self.settings.items() if k in allowed}
        given = settings.given() if settings is not None else {}
        options = {**kept, **pipeline.options_of("aresume", given, allowed),
                   **pipeline.options_of("aresume", options, allowed)}  # fmt: skip
        how = Options.from_config(self.config, **options)
        return await resumed(
            ResumeRequest(
                run_id,
                registry(self.tools if tools is _OWN else tools),
                how,
                self.config,
                state=self.state,
                from_step=call.get("from_step"),
                on_interrupted=call.get("on_interrupted"),
                on_run_created=call.get("on_run_created"),
                rerun_side_effects=call.get("rerun_side_effects", False),
                adopted_output=call.get("adopted_output"),
                approve=call.get("approve"),
            )
        )

    def resume(self, run_id: str, **options: Any) -> Any:
        """Resume an interrupted (or waiting) durable run: see :meth:`aresume` and :func:`dagplan.resume`."""
        return pipeline.sync(self.aresume(run_id, **options))

    # --- recorded runs ---

    @_own_secrets
    def runs(self, *, limit: int | None = None, statuses: Iterable[str] = ()) -> list:
        """The recorded runs, newest first (:class:`RunInfo`); ``limit``: only the newest so many (only those are
        read), ``statuses``: only runs in one of these."""
        from .interpreter.ops.runs import list_runs

        return list_runs(self.state, limit, tuple(statuses))

    @_own_secrets
    def run_report(self, run_id: str) -> Any:
        """One run's :class:`RunReport`: status, each step's status, attempts, output and error."""
        from .interpreter.ops.runs import run_report

        return run_report(run_id, self.state)

    @_own_secrets
    def events(self, run_id: str, types: Iterable[str] | None = None) -> list:
        """A run's journaled :class:`Event` values, oldest first (``types``: only those)."""
        from .interpreter.ops.runs import run_events

        return run_events(run_id, self.state, types)

    def watch(self, run_id: str) -> Any:
        """Follow a run another process (or this one) writes: ``watch(run).poll()`` returns the events
        recorded since the last poll (the viewer's live updates)."""
        from .interpreter.ops.runs import Watch

        return Watch(run_id, self.state)

    @_own_secrets
    def output_chunks(self, run_id: str, step: str) -> Any:
        """A step's recorded output as bytes, in chunks (a spilled output streams from its file), secrets masked
        (the chunks are masked as they are read: read them under :meth:`secrets`)."""
        from .interpreter.ops.runs import output_chunks

        return output_chunks(run_id, step, self.state)

    @_own_secrets
    def answer(self, run_id: str, step: str, value: Any, *, text: bool = False, channel: str = "answer",
               who: str | None = None) -> str:  # fmt: skip
        """Answer the approval gate ``step`` a waiting run stopped at; :meth:`resume` then continues it.
        ``channel`` (``answer``, ``viewer``, ``mcp``, ...) and ``who`` (by default the OS user) are recorded with
        the answer; a gate only a person may answer refuses a model's channel."""
        from .interpreter.core.vocabulary import os_user
        from .interpreter.ops.runs import answer_gate

        return answer_gate(run_id, step, value, self.state, text=text, channel=channel,
                           who=who if who is not None else os_user())  # fmt: skip

    def asked_at_terminal(self, run_id: str) -> list[str]:
        """The gates a live run of ``run_id`` asks a person about at a terminal now (their full ids)."""
        from .interpreter.ops.asking import asked

        return [str(r.get("step")) for r in asked(self._registry().open(run_id))]

    def discard(self, run_id: str, *, force: bool = False) -> str:
        """Record ``plan_aborted`` and remove a run; returns its full id. A running run is refused unless
        ``force`` (then it is stopped first); :meth:`cancel` stops a run and keeps its record."""
        from .interpreter.ops.runs import discard_run

        return discard_run(run_id, self.state, force)

    def prune(self, older_than: float | str, statuses: Iterable[str] = (), *, dry_run: bool = False) -> list:
        """``dagplan runs prune``: discard runs finished more than ``older_than`` ago (seconds, or a duration:
        ``30d``), in the given statuses (default: every finished one); never a run a process owns now."""
        from .dsl.errors import RunError
        from .dsl.ir import parse_duration
        from .interpreter.ops.runs import prune_runs

        seconds = parse_duration(older_than)
        if seconds is None:
            raise RunError.make(
                "usage", f"--older-than {older_than!r} is not a duration", hint="for example 30d, 12h or 90m"
            )
        return prune_runs(seconds, statuses, self.state, dry_run=dry_run)

    def cancel(self, run_id: str) -> str:
        """Stop a running or waiting run for good, keeping its record (status ``cancelled``); its full id."""
        from .interpreter.ops.runs import cancel_run

        return cancel_run(run_id, self.state)

    def stored_plan(self, run_id: str, tools: Any = None, *, from_step: str | None = None,
                    resumable: bool = False) -> Any:  # fmt: skip
        """The plan a recorded run runs (from its artifact, never re-derived), checked against ``tools`` (None:
        against none, to show it) and ``from_step`` (a ``resume --from`` step, checked first). ``resumable``:
        refuse first a run that ended for good (``run-finished``); None for a streamed run stopped before its
        plan was written (resuming it plans again)."""
        from .interpreter.ops.driver import refuse_finished, stored_plan as plan_of
        from .interpreter.ops.streamed import is_streamed_unwritten
        from .interpreter.tools.catalog import registry

        journal = self._registry().open(run_id)
        if resumable:
            refuse_finished(journal)
            if is_streamed_unwritten(journal):
                return None
        return plan_of(journal, registry(tools) if tools is not None else None, self.config, from_step)

    def rerun_preview(self, run_id: str, from_step: str, tools: Any = None) -> dict[str, list[str]]:
        """What ``resume(run_id, from_step=...)`` would do, running nothing: ``again``, the units whose recorded
        results it clears and runs again; ``side_effects``, those among them that already touched the world."""
        from .dsl.schedule import analysis_of
        from .interpreter.engine.resume import side_effects_again as again
        from .interpreter.stores.journal import cleared_ids
        from .interpreter.tools.catalog import registry

        journal = self._registry().open(run_id)
        plan = self.stored_plan(run_id, tools, from_step=from_step)
        progress = journal.progress()
        cleared = [u for u in cleared_ids(progress, from_step, list(analysis_of(plan).order)) if u in progress.steps]
        return {"again": cleared, "side_effects": again(progress, plan, registry(tools) if tools is not None else {},
                                                        from_step)}  # fmt: skip

    def for_run(self, run_id: str) -> "Project":
        """The project to resume a run with: this one when it has a configuration, else the one the run started
        in (so ``dagplan resume RUN`` works from anywhere)."""
        if self.config.path is not None or self._given_config is not None:
            return self
        started = self._registry().open(run_id).meta.get("config")
        if not (started and os.path.isfile(started)):
            return self
        state = self._given_state if self._given_state is not None else self.state
        return Project(os.path.dirname(started), state=state, tool_sources=self.tool_sources, tools=self._given_tools,
                       **self.settings)  # fmt: skip

    def resume_context(self, run_id: str) -> tuple[Any, dict, list[str]]:
        """What ``dagplan resume RUN`` resumes with: the project (:meth:`for_run`), its tools, and the tool
        files that changed since the run started. The tools are those it was started with (its recorded
        sources, the configured ones among them), unless others are given (then the project's)."""
        from .interpreter.tools.sources import changed_sources, load_tools, recorded_sources

        here = self.for_run(run_id)
        if self.tool_sources or self._given_tools is not None:
            return here, here.tools or {}, []
        record = here._registry().open(run_id).meta.get("tool_sources") or []
        recorded = recorded_sources(record)
        return here, (load_tools(recorded) if recorded else {}), changed_sources(record)

    # --- the pool ---

    def submit(self, plan: Any, inputs: Mapping[str, Any] | None = None) -> str:
        """Queue a run for the workers of this project's run database (``dagplan worker``); returns its id. The
        plan is checked (against this project's tools) and the inputs too, now: a worker never gets a run that
        cannot start."""

        run = pipeline.submission(self._plan(plan), self.sources, inputs, self.config)
        registry = self._registry()
        if not hasattr(registry, "submit"):
            from .dsl.errors import RunError

            hint = 'set state = "postgresql://..." (or --state URL), then start: dagplan worker'
            raise RunError.make("no-pool", "runs are submitted to the workers of a run database", hint=hint)
        return registry.submit(**run)

    def submit_each(self, plan: Any, each: str | os.PathLike, inputs: Mapping[str, Any] | None = None) -> list[str]:
        """Queue one run per line of the JSON Lines file ``each`` (each line an object of inputs, over ``inputs``);
        returns their ids, in the file's order. Every line is checked first: one bad line queues nothing."""

        plan = self._plan(plan)
        rows = pipeline.each_inputs(plan, each, inputs, self.state)
        return [self.submit(plan, row) for row in rows]

    def worker_pool(self, *, concurrency: int = 1, on_interrupted: str | None = None,
                    on_event: Callable[[str, str], None] | None = None) -> Any:  # fmt: skip
        """A worker of this project's run database: ``await pool.run(drain=...)`` claims queued and orphaned runs
        and runs them, up to ``concurrency`` at once, until ``pool.stop()`` (``drain``: until none is left).
        ValueError when the state is not a database. See :mod:`dagplan.interpreter.ops.workers`."""
        from .interpreter.core.state import is_url
        from .interpreter.ops.workers import Pool
        from .interpreter.tools.sources import load_tools

        url, cfg = self.state, self.config
        if not is_url(url):
            raise ValueError(f"workers share a run database: the state ({url or './.dagplan'}) is not a "
                             "postgresql:// URL")  # fmt: skip

        def scheduled(schedule: Any) -> dict[str, Any]:  # a schedule's run, made as `submit` makes one
            plan = pipeline.load_plan(schedule.plan, tools=self.tools, config=cfg)
            return pipeline.submission(plan, self.sources, schedule.inputs, cfg)

        return Pool(url, cfg, concurrency, load_tools=load_tools, on_interrupted=on_interrupted, on_event=on_event,
                    submission=scheduled)  # fmt: skip

    def schedules(self) -> list:
        """The configuration's schedules (``[schedule.NAME]``): name, cron, time zone, plan, next time, and, when
        the state is a run database, when each last fired and the run it submitted."""
        from .interpreter.core.state import is_url
        from .interpreter.ops.schedules import listing

        cfg, url = self.config, self.state
        marks = None
        if cfg.schedule and is_url(url):
            from .interpreter.stores.pgstore import PgRegistry

            marks = PgRegistry(url).schedule_marks()
        return listing(cfg, marks)

    def db_upgrade(self) -> tuple[int, int]:
        """Create or migrate the PostgreSQL schema of this project's run database; returns (version before,
        version after). ValueError when the state is not a PostgreSQL URL."""
        from .interpreter.core.state import is_url
        from .interpreter.stores.pgstore import upgrade

        url = self.state
        if not is_url(url):
            raise ValueError(
                f"the state ({url or './.dagplan'}) is a directory, not a postgresql:// URL: nothing to upgrade"
            )
        return upgrade(url)

    def lock_tools(self) -> tuple[str, dict[str, int]]:
        """``dagplan tools lock``: connect to every MCP server the configuration declares and write the lock
        (``dagplan.lock`` beside the configuration) that offline checks read. Returns the lock's path and the
        number of tools of each server. RunError ``mcp-none`` when no server is declared."""
        import json

        from .dsl.errors import RunError
        from .interpreter.tools.mcp import alock, declared, lock_path

        cfg = self.config
        if not cfg.mcp:
            hint = 'declare one in dagplan.toml: [mcp.NAME] command = "..." or url = "..."'
            raise RunError.make("mcp-none", "no MCP server is declared: nothing to lock", hint=hint)
        base = cfg.path.parent if cfg.path else None
        servers = {name: declared(name, table, base) for name, table in cfg.mcp.items()}
        lock = pipeline.sync(alock(servers))
        path = lock_path(cfg)
        text = json.dumps(lock, indent=2, ensure_ascii=False, sort_keys=True) + "\n"
        pipeline.write_file(path, text.encode("utf-8"))
        return str(path), {name: len(server["tools"]) for name, server in lock["servers"].items()}

    # --- plan tests and cassettes ---

    async def atest(self, paths: Iterable[str | os.PathLike] = (".",), *, select: str | None = None,
                    coverage: bool = True) -> Any:  # fmt: skip
        """Run every case of the plan test files among ``paths`` offline: a :class:`TestReport`."""
        from .interpreter.testing.plantest import run_tests

        with self.secrets():
            return await run_tests([os.fspath(p) for p in paths], self.config, select, coverage)

    def test(self, paths: Iterable[str | os.PathLike] = (".",), **options: Any) -> Any:
        """``dagplan test`` of ``paths`` (relative to the project): see :meth:`atest`."""
        return pipeline.sync(self.atest([self.root / p if not os.path.isabs(p) else p for p in paths], **options))

    def load_tests(self, path: str | os.PathLike) -> Any:
        """One test file, checked and its plan loaded: a :class:`Suite` whose cases :meth:`run_test_case` runs."""
        from .interpreter.testing.plantest import load_suite

        return load_suite(path, self.config)

    @_own_secrets
    def run_test_case(self, suite: Any, index: int) -> Any:
        """Run case ``index`` of a loaded test file; a :class:`CaseResult` (``.passed``, ``.failures``)."""
        from .interpreter.testing.plantest import run_case

        return pipeline.sync(run_case(suite, index, self.config, coverage=False))

    @_own_secrets
    def export_cassette(self, run_id: str, path: str | os.PathLike | None = None, tools: Any = None) -> dict:
        """The cassette of a recorded run (every tool and model call, this project's secrets redacted, and the
        catalog of its tools: ``tools``, else those of the sources the run recorded); written to ``path``."""
        from .dsl.errors import DagplanError
        from .interpreter.testing import cassette
        from .interpreter.tools.sources import load_tool_specs, recorded_sources

        journal = self._registry().open(run_id)
        found = cassette.from_journal(journal, self.patterns)
        if tools is not None:
            found = cassette.with_tools(found, pipeline.specs_of(tools).values())
        elif journal.meta.get("tool_sources"):
            try:
                recorded = recorded_sources(journal.meta["tool_sources"])
                found = cassette.with_tools(found, load_tool_specs(recorded).values())
            except DagplanError:  # the run's tool files moved or broke since: the calls are still worth having
                pass
        if path is not None:
            cassette.write(found, path)
        return found

    # --- plans a model writes ---

    async def aplan(self, task: str, **options: Any) -> Any:
        """A model's plan for ``task`` with this project's tools (or ``tools=``), model and settings: see
        :func:`dagplan.aplan`."""
        from . import _planning as planning

        with self.secrets():
            return await planning.planned(self, task, **options)

    def plan(self, task: str, **options: Any) -> Any:
        return pipeline.sync(self.aplan(task, **options))

    async def aagent(self, task: str, **options: Any) -> Any:
        """The agent loop on ``task`` with this project's tools (or ``tools=``): see :func:`dagplan.planning.aagent`."""
        from . import _planning as planning

        if options.get("tools") is None:
            options["tools"] = self.tools
        with self.secrets():
            return await planning.agent(self, task, **options)

    async def aevaluate(self, tasks: str | os.PathLike, **options: Any) -> Any:
        """``dagplan eval``: see :func:`dagplan.planning.aevaluate`."""
        from . import _planning as planning

        return await planning.evaluated(self, tasks, **options)

    def __repr__(self) -> str:
        return f"Project({str(self.root)!r})"
