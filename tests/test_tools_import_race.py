"""A tools file read by two threads at once gives both all its tools (issue 63: the language server's hover sent
right after didOpen answered null about one time in three).

The server checks an opened document in a worker thread, which imports the project's tools file; a hover on
the loop thread asked for the same catalog while that import ran and took the half-run module from
``sys.modules``: no tools yet. The file's import now holds a lock; here the first import is held inside the
tools file's own code until the second thread is waiting for the lock (or, without it, has returned), so the
race is met every time, by condition, with no sleep.
"""

from __future__ import annotations

import builtins
import threading

from dagplan.interpreter.tools import sources

TOOLS = """import builtins
import dagplan

builtins._dagplan_race["started"].set()
builtins._dagplan_race["go"].wait()


@dagplan.tool(purity="pure")
def lookup(account: str) -> str:
    return account
"""


class _Watched:
    """The import lock, telling the test when a second thread waits for it."""

    def __init__(self, lock, waiting: threading.Event) -> None:
        self.lock, self.waiting, self.holder = lock, waiting, None

    def __enter__(self):
        if not self.lock.acquire(blocking=False):
            self.waiting.set()
            self.lock.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.lock.release()


def test_a_second_reader_waits_for_the_tools_file_and_sees_every_tool(tmp_path, monkeypatch):
    path = tmp_path / "race_tools.py"
    path.write_text(TOOLS)
    race = {"started": threading.Event(), "go": threading.Event()}
    monkeypatch.setattr(builtins, "_dagplan_race", race, raising=False)
    waiting = threading.Event()
    monkeypatch.setattr(sources, "_IMPORTING", _Watched(threading.RLock(), waiting), raising=False)
    seen: dict[str, dict] = {}
    done = threading.Condition()

    def read(who: str) -> None:
        found = sources.load_tool_specs([str(path)])
        with done:
            seen[who] = found
            done.notify_all()

    first = threading.Thread(target=read, args=("first",))
    first.start()
    assert race["started"].wait(60)  # the first import runs the file's code, held there
    second = threading.Thread(target=read, args=("second",))
    second.start()
    with done:  # the second thread waits for the lock, or (without it) has read the half-run module
        assert done.wait_for(lambda: waiting.is_set() or "second" in seen, 60)
    race["go"].set()
    first.join(60)
    second.join(60)
    assert sorted(seen["first"]) == ["lookup"]
    assert sorted(seen["second"]) == ["lookup"]  # before the lock: [] (the module had no tools yet)
