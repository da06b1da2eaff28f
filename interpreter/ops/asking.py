"""A gate a person is asked at a terminal, answerable from elsewhere as well.

While ``dagplan run`` (or ``resume``) prompts at a gate, its run is live: the process holds the run's lock,
and the run is not ``waiting``. So that ``dagplan answer`` from another terminal (or a script, or the
viewer) can answer that gate too, the prompting process marks it in the run's folder (``asking/``, the
gate's request); an answer given elsewhere to a gate so marked is checked as any answer is
(:func:`.runs.answer_gate`) and left beside the mark; the prompting run takes whichever answer comes first,
records it as usual (with its channel and who gave it), says so, and goes on.

The runs of a file store only: a database's runs are run by workers, which never prompt.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import stat
import threading
from pathlib import Path
from typing import Any, Callable, Mapping

from ...dsl.jsontext import loads
from ..core.vocabulary import Answered, Channel
from ..stores.wal import atomic_write

POLL = 0.2  # seconds between two looks for an answer given elsewhere, while a person is asked here


def _folder(journal: Any) -> Path | None:
    run_dir = getattr(journal, "dir", None)
    return Path(run_dir) / "asking" if run_dir is not None else None


def _name(unit: str) -> str:
    return hashlib.sha256(unit.encode("utf-8", "surrogatepass")).hexdigest()[:20]


def asked(journal: Any) -> list[dict]:
    """The requests of the gates a person is being asked at a terminal now (none for a database's run)."""
    folder = _folder(journal)
    if folder is None or not folder.is_dir():
        return []
    out = []
    for path in sorted(folder.glob("*.request.json")):
        try:
            out.append(loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):  # gone meanwhile (answered), or being replaced: not asked
            continue
    return out


def post(journal: Any, unit: str, value: Any, channel: str, who: str | None) -> None:
    """An answer given elsewhere to a gate asked at a terminal, for the prompting run to take."""
    folder = _folder(journal)
    assert folder is not None  # asked() found the gate: a file store's run
    data = {"value": value, "channel": channel, "who": who}
    atomic_write(folder / f"{_name(unit)}.answer.json", json.dumps(data, ensure_ascii=False).encode("utf-8"))


async def ask_here_or_elsewhere(journal: Any, request: Mapping[str, Any],
                                prompt: Callable[[threading.Event], Any]) -> Answered:  # fmt: skip
    """Ask at this terminal (``prompt(cancelled)`` in a thread: it returns the answer typed, or stops once
    ``cancelled`` is set) while an answer given elsewhere may come first; the first one wins."""
    folder, unit = _folder(journal), str(request["step"])
    cancelled = threading.Event()
    typed = asyncio.ensure_future(asyncio.to_thread(prompt, cancelled))
    if folder is None:
        return Answered(await typed, Channel.TERMINAL)
    name = _name(unit)
    mark, answer = folder / f"{name}.request.json", folder / f"{name}.answer.json"
    folder.mkdir(exist_ok=True)
    answer.unlink(missing_ok=True)
    atomic_write(mark, json.dumps(dict(request), ensure_ascii=False, default=str).encode("utf-8"))
    try:
        while True:
            done, _ = await asyncio.wait({typed}, timeout=POLL)
            if done:
                return Answered(typed.result(), Channel.TERMINAL)
            given = _read(answer)
            if given is not None:
                return given
    finally:
        cancelled.set()
        mark.unlink(missing_ok=True)
        answer.unlink(missing_ok=True)


_MAX_ANSWER = 1 << 20  # an answer file is a few hundred bytes; more is not one


def _read(path: Path) -> Answered | None:
    """The answer a file holds, or None while there is none: a missing file, or anything that is not a regular
    file holding ``{"value": ..., "channel": <a known channel>, "who": <text or null>}``. It is opened without
    waiting (a FIFO put there never blocks the run) and without following a link; a file that holds no valid
    answer is ignored, so the person asked here still answers."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, _MAX_ANSWER + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        found = loads(data.decode("utf-8")) if len(data) <= _MAX_ANSWER else None
    except ValueError:
        return None
    if not isinstance(found, dict) or "value" not in found:
        return None
    channel, who = found.get("channel") or Channel.ANSWER, found.get("who")
    if channel not in Channel.__members__.values() or not (who is None or isinstance(who, str)):
        return None
    return Answered(found["value"], Channel(channel), who)
