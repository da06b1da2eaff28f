"""The documentation is executed: every command shown in README.md and docs/**/*.md runs here, as a user would
type it, against the installed wheel (not this source tree), in a fresh directory holding a copy of examples/.

The conventions the documents follow:

- a ```sh block is commands to run: each line (comments allowed) must exit 0, or the code its comment
  states (``# exit 3``); ```console blocks show ``$ command`` lines and the output they must print;
- ```text blocks are synopses and illustrations: not run;
- a block that cannot run here is preceded by ``<!-- not run by the suite: REASON -->``, and its test is
  reported as skipped with that reason;
- ``RUN`` in a command is the id of the newest run (what ``dagplan run`` prints first, as a user would copy it);
- a block preceded by ``<!-- write: PATH -->`` is a file the reader writes (the tutorial's): the suite writes it
  at PATH before the commands that follow.

The blocks of one document run in order in one directory: a later block may use the runs of an earlier one.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
SKIP = re.compile(r"<!--\s*not run by the suite:\s*(.*?)\s*-->")
WRITE = re.compile(r"<!--\s*write:\s*(\S+)\s*-->")
FENCE = re.compile(r"^```(\w*)\s*$")
RUN_ID = re.compile(r"^run (\d{8}-\d{6}-[0-9a-f]{4,})\b", re.M)


@dataclass(frozen=True)
class Block:
    doc: Path
    line: int  # of the opening fence
    lang: str
    text: str
    skip: str | None
    write: str | None = None  # the file the block is, for the reader to write

    @property
    def where(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"


@dataclass(frozen=True)
class Command:
    line: int
    text: str
    exit: int
    output: tuple[str, ...] | None  # console blocks: what it prints


def blocks(doc: Path) -> list[Block]:
    lines = doc.read_text(encoding="utf-8").splitlines()
    out, i = [], 0
    while i < len(lines):
        opened = FENCE.match(lines[i])
        if opened is None:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        before = next((lines[k] for k in range(i - 1, -1, -1) if lines[k].strip()), "")
        reason, write = SKIP.search(before), WRITE.search(before)
        out.append(Block(doc, i + 1, opened.group(1), "\n".join(lines[i + 1 : end]), reason and reason.group(1),
                         write and write.group(1)))  # fmt: skip
        i = end + 1
    return out


def _expected_exit(command: str) -> int:
    found = re.search(r"#.*\bexit (\d+)", command)
    return int(found.group(1)) if found else 0


def commands(block: Block) -> list[Command]:
    out: list[Command] = []
    lines = block.text.splitlines()
    if block.lang == "sh":
        pending = ""
        for n, line in enumerate(lines, start=block.line + 1):
            pending += line.rstrip("\\") + " " if line.endswith("\\") else line
            if line.endswith("\\"):
                continue
            if pending.strip() and not pending.lstrip().startswith("#"):
                out.append(Command(n, pending.strip(), _expected_exit(pending), None))
            pending = ""
    elif block.lang == "console":
        for n, line in enumerate(lines, start=block.line + 1):
            if line.startswith("$ "):
                out.append(Command(n, line[2:].strip(), _expected_exit(line), ()))
            elif out:
                last = out[-1]
                out[-1] = Command(last.line, last.text, last.exit, (*(last.output or ()), line))
    return out


def _all_blocks() -> list[Block]:
    return [b for doc in DOCS for b in blocks(doc)]


def _run_blocks(doc: Path) -> list[Block]:
    """The blocks the suite acts on, in order: files to write, commands to run."""
    return [b for b in blocks(doc) if b.write or (b.lang in ("sh", "console") and b.skip is None and not _is_setup(b))]


def _is_setup(block: Block) -> bool:
    return block.text.startswith("python3 -m venv .venv")


def test_every_runnable_block_says_what_it_is():
    """A block of commands is sh, console or text; an unmarked fence would be run by nobody."""
    unlabelled = [b.where for b in _all_blocks() if b.lang == ""]
    assert not unlabelled, f"label these blocks (sh, console, text, yaml...): {unlabelled}"
    runnable = [b for b in _all_blocks() if b.lang in ("sh", "console")]
    assert len(runnable) >= 10


@pytest.mark.parametrize("doc", [d for d in DOCS if _run_blocks(d)], ids=lambda d: str(d.relative_to(ROOT)))
def test_the_commands_of_the_document_run_as_shown(doc, installed, tmp_path):
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    env = {**installed, "HOME": str(tmp_path)}
    env.pop("DAGPLAN_STATE", None)
    env.pop("DAGPLAN_STATE_DIR", None)
    run_id, failures, ran = None, [], 0
    for block in _run_blocks(doc):
        if block.write:
            (tmp_path / block.write).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / block.write).write_text(block.text + "\n", encoding="utf-8")
            continue
        for command in commands(block):
            text = command.text
            if re.search(r"\bRUN\b", text):
                assert run_id, f"{block.where}: RUN is used before any run was started"
                text = re.sub(r"\bRUN\b", run_id, text)
            proc = subprocess.run(
                ["bash", "-c", text], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
                stdin=subprocess.DEVNULL,
            )  # fmt: skip
            ran += 1
            printed = proc.stdout + proc.stderr
            run_id = (RUN_ID.findall(printed) or [run_id])[-1]
            where = f"{doc.name}:{command.line}: {command.text}"
            if proc.returncode != command.exit:
                failures.append(
                    f"{where}\n  exit {proc.returncode}, the document says {command.exit}\n{printed[-1500:]}"
                )
            if command.output is not None:
                merged = subprocess.run(
                    ["bash", "-c", "exec 2>&1\n" + text], cwd=tmp_path, env=env, capture_output=True, text=True,
                    timeout=120, stdin=subprocess.DEVNULL,
                ).stdout  # fmt: skip
                shown = [line.rstrip() for line in command.output]
                got = [line.rstrip() for line in merged.rstrip("\n").splitlines()]
                if got != shown:
                    failures.append(f"{where}\n  the document shows:\n{chr(10).join(shown)}\n  it prints:\n{merged}")
    assert not failures, "\n\n".join(failures)
    assert ran > 0 or any(b.write for b in _run_blocks(doc))


def test_the_commands_run_the_installed_wheel(installed, tmp_path):
    proc = subprocess.run(
        ["bash", "-c", "python -c 'import dagplan; print(dagplan.__file__)'; command -v dagplan"],
        cwd=tmp_path, env=installed, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    module, script = proc.stdout.split()
    site = installed["PYTHONPATH"]
    assert module.startswith(site) and not module.startswith(str(ROOT)), module
    assert Path(script).read_text().count(site) == 1


@pytest.mark.parametrize(
    "block", [b for b in _all_blocks() if b.skip], ids=lambda b: f"{b.doc.name}:{b.line}"
)  # fmt: skip
def test_blocks_not_run_say_why(block):
    assert len(block.skip) > 20, f"{block.where}: say why the block is not run"
    pytest.skip(f"{block.where}: {block.skip}")


def test_the_first_setup_command_installs_from_the_lock_and_runs_the_example(tmp_path):
    """The README's first command, on a copy of the tracked files, in a fresh virtual environment."""
    (setup,) = [b for b in blocks(ROOT / "README.md") if _is_setup(b) and "pytest" not in b.text]
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, tracked.decode().split("\0")):
        target = tmp_path / name
        if (ROOT / name).is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, target)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    proc = subprocess.run(
        ["bash", "-c", setup.text], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert "completed" in proc.stdout + proc.stderr
    frozen = subprocess.run(
        [str(tmp_path / ".venv/bin/pip"), "freeze", "--exclude-editable"], capture_output=True, text=True
    ).stdout  # fmt: skip
    locked = (ROOT / "requirements/main.txt").read_text()
    for pin in frozen.splitlines():
        name, _, version = pin.partition("==")
        normal = re.sub(r"[-_.]+", "-", name).lower()
        assert re.search(rf"^{re.escape(normal)}=={re.escape(version)}\b", locked, re.M | re.I), pin


def test_the_locks_agree_with_the_ranges():
    """Every range of pyproject.toml has its pin in the lock (a range changed without `scripts/lock` shows)."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    locked = {}
    for line in (ROOT / "requirements/test.txt").read_text().splitlines():
        found = re.match(r"^([A-Za-z0-9_.-]+)==([^\s;]+)", line)
        if found:
            locked[re.sub(r"[-_.]+", "-", found.group(1)).lower()] = found.group(2)
    from packaging.requirements import Requirement

    wanted = list(project["dependencies"]) + [
        r for extra, reqs in project["optional-dependencies"].items() if extra != "bench" for r in reqs
    ]
    for text in wanted:
        req = Requirement(text)
        name = re.sub(r"[-_.]+", "-", req.name).lower()
        if name == "dagplan":
            continue
        assert name in locked, f"{text} is not in requirements/test.txt: run scripts/lock"
        assert req.specifier.contains(locked[name], prereleases=True), f"{name}=={locked[name]} is outside {text}"


def test_the_configuration_reference_names_every_key_with_what_it_is_for():
    """The reference page's table is generated (docs/hooks.py) from KEYS and KEY_MEANINGS: every key has both."""
    from dagplan.interpreter.core.config import KEY_MEANINGS, KEYS, key_table

    assert set(KEY_MEANINGS) == set(KEYS) and all(KEY_MEANINGS.values())
    assert all(f"| `{k}` | {KEY_MEANINGS[k]} |" in key_table() for k in KEYS)
    assert "<!-- generated: configuration-keys" in (ROOT / "docs" / "reference" / "configuration.md").read_text()
