"""The ``redact`` patterns in force: those of the project whose work this is (one context variable, kept
apart from the rules in :mod:`.redact` so that a door sets them without compiling the rules: ``check`` never
needs them).

A door sets them: a command for its process, the viewer for each request, a :class:`dagplan.Project`'s method
for its call, a run for its tasks and threads (they inherit it). Two projects in one process each mask their
own secrets; there is no process-wide list.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterable, Iterator

_PATTERNS: ContextVar[tuple[str, ...]] = ContextVar("dagplan_redact", default=())


@contextmanager
def project_patterns(patterns: Iterable[str] | None) -> Iterator[None]:
    """Within the block (and the tasks and threads it starts), ``redact`` applies these patterns: the run's
    project's, not whichever configuration the process loaded last."""
    token = _PATTERNS.set(tuple(patterns or ()))
    try:
        yield
    finally:
        _PATTERNS.reset(token)


def use_patterns(patterns: Iterable[str]) -> None:
    """From here on in this context (a command's process: it serves one project), ``redact`` applies these."""
    _PATTERNS.set(tuple(patterns))


def project_redact() -> tuple[str, ...]:
    """The patterns in force here: those of the project whose door, call or run this is (none outside one)."""
    return _PATTERNS.get()
