"""The locks install the same today and next month (issue 58).

Every install the README, the docs, `.ci/run` and the scripts give installs a lock with `--no-deps` (pip never
resolves anew, so a release published since cannot change or break what installs: httpx 0.29.0 broke the
resolving install through litellm's `httpx[http2]`), followed by `pip check`. `--no-deps` would hide a hole the
resolver used to catch, so each lock is proved complete here: every requirement, extras included, of every
package it installs on this platform is pinned in it at a version that satisfies it (scripts/lockcheck.py).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import lockcheck  # noqa: E402

LOCKS = sorted((ROOT / "requirements").glob("*.txt"))


def _without(text: str, name: str) -> str:
    """The lock with one package's entry (its pin line, hashes and comments) deleted."""
    return re.sub(rf"(?ms)^{re.escape(name)}==.*?(?=^[a-z0-9])", "", text, count=1)


def test_there_is_a_lock_per_use():
    assert {p.stem for p in LOCKS} == set(lockcheck.EXTRAS)


@pytest.mark.parametrize("lock", LOCKS, ids=lambda p: p.name)
def test_every_lock_is_complete_on_this_platform(lock):
    """Every dependency of every package the lock installs here (with its extras and markers) is pinned in
    it, at a version that satisfies it: the lock alone, installed with --no-deps, is a working install."""
    assert lockcheck.holes(lock.read_text(), lock.stem) == []


def test_every_lock_takes_the_suites_versions():
    """One version of a package across the locks (scripts/lock compiles the per-use locks with -c test.txt):
    what the suite tested is what each use installs, and the completeness check reads installed metadata."""
    suite = {}
    for entry in lockcheck.entries((ROOT / "requirements" / "test.txt").read_text()):
        suite.setdefault(entry.name, set()).add(entry.version)
    for lock in LOCKS:
        for entry in lockcheck.entries(lock.read_text()):
            assert entry.version in suite.get(entry.name, ()), (
                f"{lock.name}:{entry.line}: {entry.name}=={entry.version}"
            )


@pytest.mark.parametrize(
    "name, why",
    [("h2", "httpx==0.28.1"),  # only through litellm's httpx[http2]: an extra's requirement
     ("httpx", "the project"),  # a direct requirement of the package
     ("hpack", "h2==")],  # two levels down an extra
)  # fmt: skip
def test_a_line_deleted_from_a_lock_fails_with_its_name(name, why):
    text = (ROOT / "requirements" / "test.txt").read_text()
    cut = _without(text, name)
    assert cut != text
    found = lockcheck.holes(cut, "test")
    assert found and all(line.startswith(f"{name} (") for line in found), found
    assert any(why in line and "is not in the lock" in line for line in found), found


def test_a_pin_that_does_not_satisfy_a_requirement_is_named():
    text = (ROOT / "requirements" / "test.txt").read_text()
    (pin,) = re.findall(r"^httpx==(\S+) \\$", text, re.M)
    found = lockcheck.holes(text.replace(f"httpx=={pin} \\", "httpx==0.1.0 \\"), "test")
    assert any(line.startswith("httpx==0.1.0") and "does not satisfy" in line for line in found), found


def _installs() -> list[tuple[str, str]]:
    """Every `pip install ... -r requirements/...` a person or CI is told to run: README, docs, .ci/run, scripts."""
    places = [ROOT / "README.md", ROOT / ".ci" / "run", *sorted((ROOT / "docs").rglob("*.md"))]
    places += [p for p in sorted((ROOT / "scripts").iterdir()) if p.is_file() and p.suffix != ".py"]
    found = []
    for place in places:
        for line in place.read_text().splitlines():
            for command in re.findall(r"pip install[^`&|\n]*-r requirements/\S+", line):
                found.append((f"{place.relative_to(ROOT)}", command))
    return found


def test_every_install_of_a_lock_never_resolves_anew():
    found = _installs()
    assert len(found) >= 4, found  # the README's two commands, CI's, the per-use locks
    for place, command in found:
        assert "--no-deps" in command and "--require-hashes" in command, f"{place}: {command}"


def test_the_readmes_two_commands_check_what_they_installed():
    readme = (ROOT / "README.md").read_text()
    commands = re.findall(r"```sh\n(python3 -m venv .venv && .*?)\n```", readme)
    assert len(commands) == 2
    for command in commands:
        parts = command.split(" && ")
        lock = next(i for i, p in enumerate(parts) if "-r requirements/" in p)
        assert (
            "--no-deps" in parts[lock] and parts[lock + 1].endswith("-e .") and parts[lock + 2] == ".venv/bin/pip check"
        )


def _fake_python(root: Path, name: str) -> Path:
    exe = root / "versions" / name / "bin" / "python"
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\nexit 0\n")
    exe.chmod(0o755)
    return exe


def _find_python(version: str, pyenv_root: Path, tmp_path: Path):
    import subprocess

    env = {
        "PATH": str(tmp_path / "bin") + ":/usr/bin:/bin",
        "HOME": str(tmp_path / "home"),
        "PYENV_ROOT": str(pyenv_root),
    }
    (tmp_path / "bin").mkdir(exist_ok=True)
    return subprocess.run([str(ROOT / "scripts" / "find-python"), version], env=env, capture_output=True, text=True)


def test_ci_finds_each_claimed_python_by_its_minor_whatever_patch_the_machine_has(tmp_path):
    """CI asks for 3.12 and 3.13, not a release: a machine built next month has 3.12.9, not 3.12.1 (stop 70's CI
    failed for that). The newest final patch of the minor is taken; free-threaded, dev and rc builds are not; an
    exact release is still found; a minor the machine lacks exits 1 (and CI says so, exit 3 from test-python)."""
    root = tmp_path / "pyenv"
    for name in ("3.12.2", "3.12.10", "3.12.11t", "3.12-dev", "3.13.0rc1", "3.11.7"):
        _fake_python(root, name)
    found = _find_python("3.12", root, tmp_path)
    assert (found.returncode, found.stdout.strip()) == (0, str(root / "versions/3.12.10/bin/python"))
    assert _find_python("3.12.2", root, tmp_path).stdout.strip() == str(root / "versions/3.12.2/bin/python")
    assert _find_python("3.13", root, tmp_path).returncode == 1
    assert _find_python("3.1", root, tmp_path).returncode == 1
    bad = _find_python("three", root, tmp_path)
    assert bad.returncode == 2 and "not a version" in bad.stderr
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"for py in 3\.12 3\.13; do", ci), "CI names minors, not releases"
    test_python = (ROOT / "scripts" / "test-python").read_text()
    assert "scripts/find-python" in test_python and "exit 3" in test_python
