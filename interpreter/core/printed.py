"""What a tool prints, kept with its step: captured per call, never written raw to the terminal.

A tool's ``print()`` (and writes to ``sys.stderr``) went to the terminal, raw, between the progress lines,
and was lost with it. While a tool step runs (:func:`collecting` .. :func:`end`), the process's standard
streams, through one routing object (:func:`routed`, installed by every run), write to the step's own
buffer (a context variable: a sync tool's worker thread runs in a copy of the step's context, an async
tool's tasks inherit it); everything else still reaches the streams as before. The engine keeps what was
printed with the step (``plan_step_printed``, redacted, at most :data:`MAX_CHARS`), which ``runs show
--step``, ``events`` and the viewer show.
"""

from __future__ import annotations

import sys
from contextvars import ContextVar
from typing import Any

MAX_CHARS = 64 * 1024
_BUFFER: ContextVar[list | None] = ContextVar("dagplan_printed", default=None)


class _Routing:
    """A standard stream that writes to the running tool call's buffer, when there is one."""

    def __init__(self, inner: Any):
        self.inner = inner

    def write(self, text: str) -> int:
        buffer = _BUFFER.get()
        if buffer is None:
            return self.inner.write(text)
        buffer.append(str(text))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if _BUFFER.get() is None:
            self.inner.flush()

    def __getattr__(self, name: str) -> Any:  # encoding, isatty, fileno, buffer...: the stream's own
        return getattr(self.inner, name)


def routed() -> None:
    """Route both standard streams (again, if something replaced them since: a test runner's capture)."""
    if not isinstance(sys.stdout, _Routing):
        sys.stdout = _Routing(sys.stdout)  # type: ignore[assignment]
    if not isinstance(sys.stderr, _Routing):
        sys.stderr = _Routing(sys.stderr)  # type: ignore[assignment]


def collecting() -> tuple[list, Any]:
    """A buffer for what the current context prints from now on, and the token that ends it (``end``)."""
    buffer: list = []
    return buffer, _BUFFER.set(buffer)


def end(token: Any) -> None:
    _BUFFER.reset(token)


def text_of(buffer: list) -> str:
    """What was printed, at most :data:`MAX_CHARS` (its end kept: the last lines say most)."""
    text = "".join(buffer)
    if len(text) > MAX_CHARS:
        text = f"[{len(text) - MAX_CHARS} characters before these]\n" + text[-MAX_CHARS:]
    return text
