"""``dagplan.Project``: one project's context, built once, so that every door gives the same answer.

A project is a folder: its configuration (``dagplan.toml``, found by the one discovery rule, which stops at
the project's root), where its runs are kept (the one precedence: given, ``$DAGPLAN_STATE``,
``$DAGPLAN_STATE_DIR``, the configuration's ``state``, ``./.dagplan``), its tools (the configuration's
sources and the ones given, loaded once, on first use) and its secrets (the configuration's ``redact``
patterns, applied at every sink). The methods are the API's functions with that context filled in; what
varies per call (a plan, inputs, a run id) is all they take. ``with_options`` gives a new project with other
settings: a project never changes.

    project = dagplan.Project("path/to/project")
    result = project.run("plans/refund.yaml", inputs={"amount": 50})
    project.runs()

The module-level functions (``dagplan.run``, ``dagplan.runs``...) are this with ``Project.default()``: the
working directory's project.
"""

from __future__ import annotations

import os
from functools import cached_property
from typing import Any, Iterable, Mapping

from . import api


class Project:
    """One project's context, built once: its configuration, where its runs are kept, its tools, its secrets
    and its runs' settings; its methods are the API's functions with that context filled in (see the module
    doc)."""

    def __init__(self, root: str | os.PathLike | None = None, *, state: Any = None,
                 tool_sources: Iterable[str] = (), tools: Any = None, **settings: Any) -> None:  # fmt: skip
        from .interpreter.core.config import project_root

        self.root = project_root(root)
        self._given_state = state
        # a tool file given relative is the project's (as `tools = [...]` of its configuration is)
        self.tool_sources = tuple(str(self.root / s) if s.endswith(".py") and not os.path.isabs(s) else s
                                  for s in map(os.fspath, tool_sources))  # fmt: skip
        self._given_tools = tools
        # every run's settings (model, max_cost, subscribers...), refused by the rule arun's are
        self.settings: Mapping[str, Any] = api._options("Project", settings, api.settings_names()) if settings else {}

    @classmethod
    def default(cls) -> "Project":
        """The working directory's project."""
        return cls()

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
                       tools=tools if tools is not None else self._given_tools,
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
        an MCP server that runs for hours sees an edited dagplan.toml)."""
        return api.load_config(self.root)

    @property
    def state(self) -> Any:
        """Where its runs are kept (the one rule of every door: interpreter/core/config.state_of)."""
        from .interpreter.core.config import state_of

        return state_of(self._given_state, self.config, self.root)

    @property
    def sources(self) -> list[str]:
        """Where its tools come from: the configuration's ``tools``, then the ones given."""
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

    def _context(self) -> dict[str, Any]:
        return {"config": self.config, "state_dir": self.state}

    # --- the API, with the context filled in ---

    def load(self, source: Any = None, *, text: Any = None, name: str | None = None) -> Any:
        return api.load(source, text=text, name=name, tools=self.tools, config=self.config)

    def check(self, paths: str | os.PathLike | Iterable[str | os.PathLike]) -> list:
        """``dagplan check`` of one file or several (a path alone is one file, never its characters)."""
        if isinstance(paths, (str, os.PathLike)):
            paths = [paths]
        return api.check_files(paths, tool_sources=self.tool_sources, config=self.config)

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
        return api._checker(self.config, self.tool_sources)(text=text, name=name, root=root)

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

    def preview(self, plan: Any) -> Any:
        return api.preview(self._plan(plan), self.tools, self.config)

    async def arun(self, plan: Any, **options: Any) -> Any:
        """Run a plan with this project's context and settings; ``options``: what varies per run (``inputs``,
        ``approve``, ``durable``, ``run_id``, ``reuse``, ``cassette``, ``approval``, ``on_run_created``) or a
        setting for this run only. See :func:`dagplan.arun`."""
        return await api.arun(self._plan(plan), **{"tools": self.tools, "tool_sources": self.sources,
                                                   **self._context(), **self.settings, **options})  # fmt: skip

    def run(self, plan: Any, **options: Any) -> Any:
        return api._sync(self.arun(plan, **options))

    async def aresume(self, run_id: str, **options: Any) -> Any:
        """Resume a durable run of this project (see :func:`dagplan.aresume`), with the settings a resume can
        change."""
        kept = {k: v for k, v in self.settings.items() if k in api.RESUME_SETTINGS}
        return await api.aresume(run_id, **{"tools": self.tools, **self._context(), **kept, **options})

    def resume(self, run_id: str, **options: Any) -> Any:
        return api._sync(self.aresume(run_id, **options))

    def runs(self, *, limit: int | None = None, statuses: Iterable[str] = ()) -> list:
        return api.runs(self.state, limit=limit, statuses=statuses)

    def run_report(self, run_id: str) -> Any:
        return api.run_report(run_id, self.state)

    def events(self, run_id: str, types: Iterable[str] | None = None) -> list:
        return api.events(run_id, self.state, types)

    def answer(self, run_id: str, step: str, value: Any, **options: Any) -> str:
        return api.answer(run_id, step, value, self.state, **options)

    def submit(self, plan: Any, inputs: Mapping[str, Any] | None = None) -> str:
        from . import pool

        return pool.submit(self._plan(plan), tools=self.tools, tool_sources=self.sources, inputs=inputs,
                          **self._context())  # fmt: skip

    def load_tests(self, path: str | os.PathLike) -> Any:
        from . import plantests

        return plantests.load_tests(path, config=self.config)

    def run_test_case(self, suite: Any, index: int) -> Any:
        from . import plantests

        return plantests.run_test_case(suite, index, config=self.config)

    def worker_pool(self, **options: Any) -> Any:
        """A worker of this project's run database (see :func:`dagplan.pool.worker_pool`)."""
        from . import pool

        return pool.worker_pool(self.state, config=self.config, **options)

    def schedules(self) -> list:
        from . import pool

        return pool.schedules(self.state, config=self.config)

    def test(self, paths: Iterable[str | os.PathLike] = (".",), **options: Any) -> Any:
        from . import plantests

        return plantests.test([self.root / p if not os.path.isabs(p) else p for p in paths], config=self.config,
                        **options)  # fmt: skip

    def approve(self, plan: Any, who: str | None = None) -> dict:
        return api.approve(self._plan(plan), tools=self.tools, config=self.config, who=who)

    def check_approval(self, approval: Any, plan: Any) -> dict:
        return api.check_approval(approval, self._plan(plan), tools=self.tools, config=self.config)

    def diff(self, old: Any, new: Any) -> Any:
        return api.diff(old, new, tool_sources=self.tool_sources, **self._context())

    def _plan(self, plan: Any) -> Any:
        """A plan given as a path or text-free object: loaded against this project's tools, relative to it."""
        if isinstance(plan, (str, os.PathLike)) and not os.path.isabs(plan) and not os.path.exists(plan):
            plan = self.root / plan
        return plan if not isinstance(plan, (str, os.PathLike)) else self.load(plan)

    def __repr__(self) -> str:
        return f"Project({str(self.root)!r})"
