"""Project configuration: ``dagplan.toml``, or ``[tool.dagplan]`` in ``pyproject.toml``.

Looked up from the working directory upwards; the first file that has a dagplan
section wins. Every key is optional::

    model = "openai/gpt-4o-mini"     # default model of LLM steps and the planner ($DAGPLAN_MODEL wins over none)
    tools = ["tools.py"]             # tool files or modules, like --tools
    max_concurrency = 16
    step_max_iterations = 5          # tool-calling loop bound inside an LLM step
    max_cost = 0.50                  # USD per run; max_tokens likewise
    max_steps = 1000                 # `check` fails plans that could execute more
    max_items = 100                  # default cap of for_each steps without max_items
    state_dir = ".dagplan"

    [resume]
    default = "retry_pending"        # retry_pending | discard
    side_effect = "ask"              # interrupted side-effecting steps: ask | adopt | retry
    pure = "retry"                   # interrupted pure / idempotent steps: retry | adopt
    idempotent = "retry"
    undeclared = "retry"             # steps that declare no purity: at-least-once

    [llm]                            # passed to litellm as is (api_base, api_key env names, ...)
    api_base = "http://127.0.0.1:8000/v1"
"""

from __future__ import annotations

import os
import tomllib
from stat import S_ISREG
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..dsl.errors import RunError

RESUME_DEFAULTS = {
    "default": "retry_pending",
    "side_effect": "ask",
    "pure": "retry",
    "idempotent": "retry",
    "undeclared": "retry",
}
_CHOICES = {
    "default": ("retry_pending", "discard"),
    "side_effect": ("ask", "adopt", "retry"),
    "pure": ("retry", "adopt"),
    "idempotent": ("retry", "adopt"),
    "undeclared": ("retry", "adopt", "ask"),
}


@dataclass(frozen=True)
class Config:
    path: Path | None = None
    model: str | None = None
    tools: tuple[str, ...] = ()
    max_concurrency: int = 16
    step_max_iterations: int = 5
    max_cost: float | None = None
    max_tokens: int | None = None
    max_steps: int | None = None
    max_items: int | None = None  # default cap of for_each steps that give no max_items
    state_dir: str | None = None
    resume: Mapping[str, str] = field(default_factory=lambda: dict(RESUME_DEFAULTS))
    llm: Mapping[str, Any] = field(default_factory=dict)
    plan_first: Mapping[str, Any] = field(default_factory=dict)

    @property
    def default_model(self) -> str | None:
        return os.environ.get("DAGPLAN_MODEL") or self.model


def load_config(start: str | os.PathLike | None = None) -> Config:
    """The configuration that applies in ``start`` (default: the working directory)."""
    folder = os.path.abspath(start or os.getcwd())
    while True:
        for name, section in (("dagplan.toml", None), ("pyproject.toml", ("tool", "dagplan"))):
            path = folder + os.sep + name if folder != os.sep else os.sep + name
            table = _read(path, section)
            if table is not None:
                return _build(Path(path), table)
        parent = os.path.dirname(folder)
        if parent == folder:
            return Config()
        folder = parent


_PARSED: dict[str, tuple[tuple[int, int], dict]] = {}  # path -> (mtime_ns, size), its TOML


def _read(path: str, section: tuple[str, ...] | None) -> dict | None:
    """The file's dagplan table, or None (no such file, or no dagplan section).

    A file is parsed again only when it changed: every run reads the configuration, and
    parsing a large pyproject.toml costs about 0.5 ms (measured: 450 us -> 40 us a run)."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    if not S_ISREG(stat.st_mode):
        return None
    try:
        found = _PARSED.get(path)
        if found is not None and found[0] == (stat.st_mtime_ns, stat.st_size):
            data = found[1]
        else:
            with open(path, encoding="utf-8") as f:
                data = tomllib.loads(f.read())
            _PARSED[path] = ((stat.st_mtime_ns, stat.st_size), data)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise RunError.make("config", f"cannot read {path}: {exc}", hint="fix the TOML syntax") from None
    for key in section or ():
        inner = data.get(key)
        if not isinstance(inner, dict):
            return None
        data = inner
    return data


def _build(path: Path, table: dict) -> Config:
    known = set(Config.__dataclass_fields__) - {"path"}
    unknown = sorted(set(table) - known)
    if unknown:
        raise RunError.make(
            "config", f"{path}: unknown key(s) {', '.join(unknown)}", hint=f"known keys: {', '.join(sorted(known))}"
        )
    resume = {**RESUME_DEFAULTS, **table.get("resume", {})}
    for key, value in resume.items():
        if value not in _CHOICES.get(key, (value,)):
            raise RunError.make(
                "config", f"{path}: resume.{key} = {value!r}", hint=f"one of {', '.join(_CHOICES[key])}"
            )
    values = {k: v for k, v in table.items() if k != "resume"}
    if "tools" in values:
        base = path.parent
        values["tools"] = tuple(str(base / t) if t.endswith(".py") else t for t in values["tools"])
    return Config(path=path, resume=resume, **values)
