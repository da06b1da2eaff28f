"""Where a tool failed: the frames of its traceback in the user's code, as plain data a journal keeps.

A tool's ``KeyError: 'title'`` says nothing of where; its traceback does, but most of its frames are ours
(the engine, asyncio, the worker thread) or a library's. :func:`frames` keeps the user's (every file outside
dagplan, the standard library and the installed packages; the innermost frame always, where it was raised,
unless that is dagplan's own and no frame is the user's: an error the engine made has no traceback),
each ``{file, line, function, code}``, the code line redacted (:mod:`.redact`): what the run table shows as
``at tools.py:12 in fetch``, and ``-v``, ``runs show --step``, ``events`` and the viewer show whole.
"""

from __future__ import annotations

import os
import sysconfig
import traceback
from pathlib import Path
from typing import Any

MAX_FRAMES = 30
MAX_CODE = 240
_LIBRARIES = tuple(
    {
        str(Path(p).resolve())
        for key in ("stdlib", "platstdlib", "purelib", "platlib")
        if (p := sysconfig.get_paths().get(key))
    }
)


def frames(exc: BaseException) -> list[dict[str, Any]] | None:
    """The user's frames of what ``exc`` (or the error it wraps) went through, innermost last; None when
    it carries no traceback (an error the engine made, not a tool)."""
    from .redact import redact

    found = _traceback_of(exc)
    if found is None:
        return None
    every = traceback.extract_tb(found)
    if not every:
        return None
    kept = [f for f in every if is_users_file(f.filename)]
    if not kept and _dagplans(every[-1].filename):  # an error the engine made (a refusal, a loop's bound)
        return None
    if not kept or kept[-1] is not every[-1]:
        kept.append(every[-1])  # where it was raised, whoever's code it is
    return [{"file": f.filename, "line": f.lineno, "function": f.name,
             **({"code": redact((f.line or "").strip()[:MAX_CODE])} if f.line else {})}
            for f in kept[-MAX_FRAMES:]]  # fmt: skip


def where(trace: Any) -> str:
    """``tools.py:12 in fetch``: the innermost of the user's frames (a path under the working folder shown
    relative to it)."""
    if not trace:
        return ""
    users = [f for f in trace if is_users_file(str(f.get("file", "")))] or trace
    last = users[-1]
    return f"{shown_path(str(last.get('file', '?')))}:{last.get('line', '?')} in {last.get('function', '?')}"


def lines(trace: Any) -> list[str]:
    """The frames as Python prints them, innermost last."""
    out = []
    for f in trace or ():
        out.append(
            f'  File "{shown_path(str(f.get("file", "?")))}", line {f.get("line", "?")}, in {f.get("function", "?")}'
        )
        if f.get("code"):
            out.append(f"    {f['code']}")
    return out


def shown_path(path: str) -> str:
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive
        return path
    return relative if not relative.startswith("..") else path


def _ours() -> tuple[str, ...]:
    """The folders of dagplan's own code: the package, and its interpreter and dsl (one folder each when
    installed; three in an editable checkout)."""
    global _OURS
    if _OURS is None:
        from ...dsl import errors

        here = Path(__file__).resolve()
        found = {here.parents[1], Path(errors.__file__).resolve().parent}
        package = here.parents[2]
        if (package / "api.py").is_file():  # installed: dagplan/interpreter/core/trace.py
            found.add(package)
        else:  # an editable checkout: interpreter/ and dsl/ beside dagplan/
            found.add(package / "dagplan")
        _OURS = tuple(str(f) + os.sep for f in found)
    return _OURS


_OURS: tuple[str, ...] | None = None


def _dagplans(filename: str) -> bool:
    return bool(filename) and str(Path(filename).resolve()).startswith(_ours())


def is_users_file(filename: str) -> bool:
    """Whether a file is the user's code: outside dagplan, the standard library and the installed packages
    (the one rule: a traceback's frames, a tool's code identity)."""
    if not filename or filename.startswith("<"):
        return False
    path = str(Path(filename).resolve())
    return not path.startswith(_ours()) and not path.startswith(_LIBRARIES)


def _traceback_of(exc: BaseException) -> Any:
    """The traceback that reached user code: the error's own, else the one of the error it wraps."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        tb = current.__traceback__
        if tb is not None and any(is_users_file(f.filename) for f in traceback.extract_tb(tb)):
            return tb
        current = current.__cause__ or getattr(current, "original", None)
    return exc.__traceback__
