"""A run's settings, one typed holder: :class:`RunSettings`.

Each field is one setting, written once here with its help (the attribute's docstring): :func:`dagplan.arun`,
:class:`dagplan.Project` and :func:`dagplan.aresume` take them by name (or as one ``settings=`` value), the API
reference shows them from this source, and the CLI's options for ``run``, ``resume``, ``plan`` and ``agent``
are generated from the fields whose metadata names a flag (:func:`options_of`). A new setting is one field.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import lru_cache
from typing import Any, Callable, Iterable, Mapping

ON_RESUME = "resume"  # a setting a resume may change (the rest are the run's, kept from its start)


def _setting(flag: str | None = None, *, commands: Iterable[str] = (), resume: bool = False,
             choices: tuple[str, ...] = (), minimum: int | None = None) -> Any:  # fmt: skip
    """One field: its CLI ``flag`` on ``commands`` (none: Python only), whether a resume may change it, and the
    values the flag takes. Its help is the attribute's docstring, below it."""
    meta = {"flag": flag, "commands": tuple(commands), ON_RESUME: resume, "choices": choices, "minimum": minimum}
    return field(default=None, metadata=meta)


@dataclass(frozen=True)
class RunSettings:
    """The settings of a run: what :meth:`dagplan.Project.with_options` keeps for every run of a project, and
    what :func:`dagplan.arun` takes for one run (by name, or as ``settings=RunSettings(...)``). A field left
    ``None`` is not given: the configuration's value applies (``dagplan.toml``), else the default said."""

    model: str | None = _setting("--model", commands=("run", "resume", "plan", "agent"), resume=True)
    """Default model of LLM steps: a litellm model name, or ``local`` (SmolLM2-135M on this machine, the
    ``local`` extra); default ``$DAGPLAN_MODEL``, else ``model`` in the configuration."""

    completion_kwargs: Mapping[str, Any] | None = _setting(resume=True)
    """Extra arguments of every model call (``temperature``, ``api_base``...), over the configuration's
    ``[llm]``."""

    max_cost: float | None = _setting()
    """The most the run's model calls may cost, in dollars (the plan's own ``max_cost`` may lower it)."""

    max_tokens: int | None = _setting()
    """The most tokens the run's model calls may use (the plan's own ``max_tokens`` may lower it)."""

    max_concurrency: int | None = _setting("--max-concurrency", commands=("run", "resume"), resume=True, minimum=1)
    """Steps running at once (default 16, or ``max_concurrency`` in the configuration)."""

    on_limit_exceeded: Callable[..., Any] | None = _setting(resume=True)
    """Asked when a step used its retries or a limit is reached: may extend them (the CLI asks a person)."""

    subscribers: Iterable[Callable[[Any], Any]] | None = _setting(resume=True)
    """Callables given every :class:`~dagplan.Event` of the run."""

    ask_gate: Callable[[Any], Any] | None = _setting(resume=True)
    """Answers approval gates as the run reaches them; without it a run that has a gate is durable and stops
    ``waiting`` there (answer it later: :func:`dagplan.answer`, then :func:`dagplan.resume`)."""

    executor: str | None = _setting("--executor", commands=("run",), choices=("local", "ray"))
    """Where tool calls run when neither the tool nor the plan says: ``local``, or ``ray`` (Ray tasks);
    default: the configuration's, else local."""

    person_gates: bool | None = _setting()
    """Every gate of the run and of its resumes is one only a person may answer, as for a plan a model wrote:
    a model's channel cannot answer it."""

    def given(self) -> dict[str, Any]:
        """The settings given (not None), by name."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}

    def merged(self, **more: Any) -> "RunSettings":
        """These settings with ``more`` over them (None in ``more`` keeps this one's)."""
        return RunSettings(**{**self.given(), **{k: v for k, v in more.items() if v is not None}})


NAMES: tuple[str, ...] = tuple(f.name for f in fields(RunSettings))
ON_RESUME_NAMES: tuple[str, ...] = tuple(f.name for f in fields(RunSettings) if f.metadata[ON_RESUME])


@lru_cache(maxsize=1)
def helps() -> dict[str, str]:
    """Each field's help: its docstring in this source (what the API reference shows), as one line."""
    import ast
    import inspect

    try:
        tree = ast.parse(inspect.getsource(RunSettings))
    except (OSError, TypeError):  # no source to read (a frozen build): the flags go without help
        return {}
    body = tree.body[0].body  # type: ignore[attr-defined]
    found: dict[str, str] = {}
    for node, after in zip(body, body[1:]):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
                found[node.target.id] = " ".join(str(after.value.value).split()).replace("``", "`")
    return found


def options_of(command: str) -> Callable[[Any], Any]:
    """A decorator giving ``command`` the CLI options of the settings it takes (each from its field: flag, help,
    values), and its function one ``settings`` argument, a :class:`RunSettings` of what was given."""
    import functools

    import click

    mine = [f for f in fields(RunSettings) if command in f.metadata["commands"]]

    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def with_settings(*args: Any, **kwargs: Any) -> Any:
            given = {f.name: kwargs.pop(f.name) for f in mine}
            return function(*args, settings=RunSettings(**given), **kwargs)

        for f in reversed(mine):
            meta = f.metadata
            kind = (click.Choice(meta["choices"]) if meta["choices"]
                    else click.IntRange(meta["minimum"]) if meta["minimum"] is not None else None)  # fmt: skip
            with_settings = click.option(meta["flag"], f.name, type=kind, default=None,
                                         help=helps().get(f.name))(with_settings)  # fmt: skip
        return with_settings

    return decorate
