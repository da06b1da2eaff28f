"""The pytest plugin (entry point ``pytest11``): plan test files run inside a project's ``pytest``.

Every ``*.test.yaml`` (``.test.yml``, ``.test.json``) pytest meets while collecting becomes a
file of test items, one per case, run offline exactly as ``dagplan test`` runs them. A
failing case reports each failed expectation at its line of the test file; a test file that
cannot run (a bad field, a plan that does not check) is a collection error listing its
diagnostics. Nothing is imported beyond this module until such a file is collected.
"""

from __future__ import annotations

from typing import Any

import pytest


def pytest_collect_file(parent: pytest.Collector, file_path: Any) -> pytest.Collector | None:
    from .dsl.load import is_test_file

    if is_test_file(file_path):
        return PlanTestFile.from_parent(parent, path=file_path)
    return None


class CaseFailed(Exception):
    """A case whose expectations did not hold."""


class PlanTestFile(pytest.File):
    def collect(self):
        from .project import Project

        # the test file's project (its dagplan.toml: tools, secrets, state), wherever pytest was started
        project = Project.of_file(self.path)
        suite = project.load_tests(self.path)
        for index, case in enumerate(suite.cases):
            yield PlanTestCase.from_parent(self, name=case["name"], suite=suite, index=index, project=project)

    def repr_failure(self, excinfo: Any, style: Any = None) -> Any:
        from .dsl.errors import DagplanError

        if isinstance(excinfo.value, DagplanError):
            return "\n".join(d.format() for d in excinfo.value.diagnostics)
        return super().repr_failure(excinfo)


class PlanTestCase(pytest.Item):
    def __init__(self, *, suite: Any, index: int, project: Any, **kwargs: Any):
        super().__init__(**kwargs)
        self.suite, self.index, self.project = suite, index, project

    def runtest(self) -> None:
        result = self.project.run_test_case(self.suite, self.index)
        if not result.passed:
            raise CaseFailed(result)

    def repr_failure(self, excinfo: Any, style: Any = None) -> Any:
        if isinstance(excinfo.value, CaseFailed):
            result = excinfo.value.args[0]
            lines = [f"{result.span} {result.name}"]
            lines += [f"  {f.span}: {f.message}" for f in result.failures]
            return "\n".join(lines)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Any, int, str]:
        line = self.suite.span("cases", self.index, "name").line
        return self.path, max(0, line - 1), f"plan case: {self.name}"
