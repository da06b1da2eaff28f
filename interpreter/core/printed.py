"""What a tool prints, kept with its step: captured per call, never written raw to the terminal.

A tool's ``print()`` (and writes to ``sys.stderr``) went to the terminal, raw, between the progress lines,
and was lost with it. While a tool step runs (the engine sets a :class:`Printed` in :data:`BUFFER`, then
resets it), the process's standard streams, through one routing object (:func:`routed`, installed by every
run), write to the step's own buffer (a context variable: a sync tool's worker thread runs in a copy of the
step's context, an async tool's tasks inherit it); everything else still reaches the streams as before. The
engine keeps what was printed with the step (``plan_step_printed``, redacted, at most :data:`MAX_CHARS`),
which ``runs show --step``, ``events`` and the viewer show.
"""

from __future__ import annotations

import sys
from contextvars import ContextVar
from typing import Any

MAX_CHARS = 64 * 1024
_BUFFER: ContextVar["Printed | None"] = ContextVar("dagplan_printed", default=None)


class Printed:
    """What one tool call printed: the last :data:`MAX_CHARS` characters and how many came before, held
    within about twice that whatever the tool prints (a tool printing gigabytes costs no memory). Bytes
    (``sys.stdout.buffer``) are decoded as UTF-8, a bad byte shown as U+FFFD, never passed on raw.

    Made for every tool call and mostly never written to: nothing is set up until the first write (no
    ``__init__``; the class's values stand in until then), and ``printed.size`` says whether anything was."""

    pieces: list[str] | None = None
    size = 0
    dropped = 0
    _decoder: Any = None

    def add(self, text: str) -> None:
        pieces = self.pieces
        if pieces is None:  # the first write; two threads of one tool call may race to it: one list wins
            pieces = self.__dict__.setdefault("pieces", [])
        pieces.append(text)
        self.size += len(text)
        if self.size > 2 * MAX_CHARS:
            whole = "".join(pieces)
            cut = len(whole) - MAX_CHARS
            self.dropped += cut
            self.pieces, self.size = [whole[cut:]], MAX_CHARS

    def add_bytes(self, data: Any) -> None:
        if self._decoder is None:
            import codecs

            self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.add(self._decoder.decode(bytes(data)))

    def __bool__(self) -> bool:
        return bool(self.size or self.dropped)

    def text(self) -> str:
        """What was printed, at most :data:`MAX_CHARS` (its end kept: the last lines say most)."""
        whole = "".join(self.pieces or ())
        dropped = self.dropped
        if len(whole) > MAX_CHARS:
            dropped += len(whole) - MAX_CHARS
            whole = whole[-MAX_CHARS:]
        return f"[{dropped} characters before these]\n" + whole if dropped else whole


class _Routed:
    """What a routed stream shares, text or bytes: writes go to the running tool call's buffer when there is
    one (:meth:`_keep`), else to the stream's own (``inner``); everything else is the stream's own."""

    inner: Any

    def _keep(self, buffer: Printed, data: Any) -> None:
        raise NotImplementedError

    def write(self, data: Any) -> int:
        buffer = _BUFFER.get()
        if buffer is None:
            return self.inner.write(data)
        self._keep(buffer, data)
        return len(data)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if _BUFFER.get() is None:
            self.inner.flush()

    def __getattr__(self, name: str) -> Any:  # encoding, isatty, fileno...: the stream's own
        return getattr(self.inner, name)


class _Bytes(_Routed):
    """The byte side of a routed stream (``sys.stdout.buffer``)."""

    def __init__(self, owner: "_Routing"):
        self.owner = owner

    @property  # type: ignore[override]
    def inner(self) -> Any:  # read at each write: the text stream's own may have been replaced
        return self.owner.inner.buffer

    def _keep(self, buffer: Printed, data: Any) -> None:
        buffer.add_bytes(data)


class _Routing(_Routed):
    """A standard stream that writes to the running tool call's buffer, when there is one."""

    def __init__(self, inner: Any):
        self.inner = inner

    def _keep(self, buffer: Printed, data: Any) -> None:
        buffer.add(str(data))

    @property
    def buffer(self) -> Any:
        """The byte stream: routed as the text one is (a tool writing bytes reaches its step, not the terminal)."""
        if not hasattr(self.inner, "buffer"):
            raise AttributeError("buffer")
        return _Bytes(self)


def routed() -> None:
    """Route both standard streams (again, if something replaced them since: a test runner's capture)."""
    if not isinstance(sys.stdout, _Routing):
        sys.stdout = _Routing(sys.stdout)  # type: ignore[assignment]
    if not isinstance(sys.stderr, _Routing):
        sys.stderr = _Routing(sys.stderr)  # type: ignore[assignment]


BUFFER = _BUFFER  # the running tool call's buffer: the engine sets a Printed for each call and resets it after
