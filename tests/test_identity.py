"""A tool's code identity (interpreter/tools/identity.py): the one rule approvals, --reuse and the journal ask.

Each case changes something a tool's function does not show in its own source (a helper, a module constant,
another module of the project, a closure's value, a partial's argument, a default) and asserts the identity
moves; and what does not change the code (a new process, an unrelated module) leaves it equal."""

from __future__ import annotations

import functools
import importlib
import subprocess
import sys
import textwrap

import pytest

from dagplan.interpreter.tools.identity import code_identity


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    made = []

    def write(name: str, text: str):
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(text))
        importlib.invalidate_caches()
        for module in [name, *made]:
            sys.modules.pop(module, None)
        made.append(name)
        return importlib.import_module(name)

    yield write
    for module in made:
        sys.modules.pop(module, None)


def test_a_module_constant_or_helper_the_tool_uses_is_part_of_its_identity(project):
    text = "RATE = {}\ndef convert(a):\n    return a * RATE\ndef price(a):\n    return convert(a)\n"
    before = code_identity(project("prices", text.format("1.10")).price)  # as a first run records it
    assert code_identity(project("prices", text.format("2.00")).price) != before  # same size, same second


def test_a_project_module_the_tool_file_imports_is_part_of_its_identity(project):
    project("helpers", "def act(a):\n    return a\n")
    first = code_identity(project("paytools", "from helpers import act\ndef pay(a):\n    return act(a)\n").pay)
    project("helpers", "def act(a):\n    return a * 100\n")
    second = code_identity(project("paytools", "from helpers import act\ndef pay(a):\n    return act(a)\n").pay)
    assert first != second


def test_a_module_imported_whole_counts_too_and_a_module_not_used_does_not(project):
    project("rates", "RATE = 1\n")
    project("unrelated", "X = 1\n")
    first = code_identity(project("shop", "import rates\ndef price(a):\n    return a * rates.RATE\n").price)
    project("unrelated", "X = 2\n")
    assert code_identity(project("shop", "import rates\ndef price(a):\n    return a * rates.RATE\n").price) == first
    project("rates", "RATE = 2\n")
    assert code_identity(project("shop", "import rates\ndef price(a):\n    return a * rates.RATE\n").price) != first


def test_closures_partials_and_defaults(project):
    module = project(
        "made",
        """
        import functools
        def make(rate):
            def price(a):
                return a * rate
            return price
        def scaled(a, rate=1):
            return a * rate
        """,
    )
    assert code_identity(module.make(1)) != code_identity(module.make(2))
    assert code_identity(module.make(1)) == code_identity(module.make(1))
    assert code_identity(functools.partial(module.scaled, rate=1)) != code_identity(
        functools.partial(module.scaled, rate=2)
    )
    assert code_identity(functools.partial(module.scaled, rate=1)) != code_identity(module.scaled)


def test_the_identity_is_the_same_in_another_process(tmp_path):
    """Reuse and approvals compare identities across processes: nothing of a process (an address) is in it."""
    (tmp_path / "tools.py").write_text(
        "import functools\nclass Box:\n    pass\nBOX = Box()\n"
        "def f(a, box=BOX):\n    return a\ng = functools.partial(f, box=BOX)\n"
    )
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]); import tools;"
        "from dagplan.interpreter.tools.identity import code_identity as c; print(c(tools.f), c(tools.g))"
    )
    runs = {subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True,
                           check=True).stdout for _ in range(2)}  # fmt: skip
    assert len(runs) == 1, runs
