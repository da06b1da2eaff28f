"""Plan tests and cassettes: ``test`` / ``atest`` (every case of the ``*.test.yaml`` files, offline),
``load_tests`` and ``run_test_case`` (one file, one case: the pytest plugin), ``untested_paths`` (the
branch combinations no case covered) and ``export_cassette`` / ``read_cassette`` (a recorded run's calls,
to replay with no tool or model).
"""

from __future__ import annotations

import os
from typing import Any, Iterable

from ._pipeline import ToolsArg
from ._pipeline import sync as _sync
from .api import _here, load


async def atest(
    paths: Iterable[str | os.PathLike] = (".",), *, config: Any = None, select: str | None = None, coverage: bool = True
):
    """Run every case of the plan test files among ``paths`` (``*.test.yaml``; directories searched,
    globs expanded) offline; returns a :class:`TestReport` (``.coverage()`` per plan unless
    ``coverage=False``, which spares each case the events coverage is read from)."""
    return await _here(config).atest(paths, select=select, coverage=coverage)


def test(paths: Iterable[str | os.PathLike] = (".",), **kwargs: Any):
    """``dagplan test``: see :func:`atest`."""
    return _sync(atest(paths, **kwargs))


test.__test__ = False  # type: ignore[attr-defined]  # a library function, not a pytest test


def find_tests(paths: Iterable[str | os.PathLike]) -> list[str]:
    """The plan test files among ``paths`` (files, directories searched, globs)."""
    from .interpreter.testing.plantest import find_tests as found

    return found(paths)


def load_tests(path: str | os.PathLike, config: Any = None):
    """One test file, checked and its plan loaded: a :class:`Suite` whose cases :func:`run_test_case` runs."""
    return _here(config).load_tests(path)


def run_test_case(suite: Any, index: int, config: Any = None):
    """Run case ``index`` of a loaded test file; a :class:`CaseResult` (``.passed``, ``.failures``)."""
    return _here(config).run_test_case(suite, index)


def untested_paths(report: Any, plan_path: str, limit: int = 64):
    """The branch combinations of a plan no case of ``report`` covered (at most ``limit`` enumerated),
    each with a starting test case to fill in: a :class:`PathsReport`."""
    from .interpreter.testing.paths import untested

    suites = [s for s in report.suites if os.path.abspath(s.plan_path) == os.path.abspath(plan_path)]
    plan = suites[0].plan if suites else load(plan_path)
    return untested(plan, plan_path, report.runs_of(plan_path), limit)


def export_cassette(
    run_id: str, path: str | os.PathLike | None = None, state_dir: Any = None, config: Any = None,
    tools: ToolsArg = None,
) -> dict:  # fmt: skip
    """The cassette of a recorded run (every tool and model call, secrets redacted, and the catalog of
    its tools: ``tools``, else those of the sources the run recorded); written to ``path`` when given.
    Replay it with ``run(..., cassette=...)`` or ``cassette:`` in a test case (no tools needed)."""
    return _here(config, state_dir).export_cassette(run_id, path, tools)


def read_cassette(path: str | os.PathLike) -> dict:
    """A cassette file's data, checked (a bad one is a ``bad-cassette`` error with its place)."""
    from .interpreter.testing.cassette import read

    return read(path)
