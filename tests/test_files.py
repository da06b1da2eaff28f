"""The one writer of files (dsl/files.py): atomic for a regular file, through for anything else."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading

import pytest

from dagplan.dsl.errors import DagplanError
from dagplan.dsl.files import write_file


def test_a_regular_file_is_replaced_atomically_and_keeps_its_mode(tmp_path):
    target = tmp_path / "out.json"
    target.write_text("old")
    target.chmod(0o600)
    write_file(target, b"new")
    assert target.read_text() == "new" and stat.S_IMODE(target.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]  # no temporary file left
    write_file(tmp_path / "fresh.json", b"x")
    assert (tmp_path / "fresh.json").read_bytes() == b"x"


def test_a_symlink_stays_a_link_and_its_target_is_written(tmp_path):
    (tmp_path / "real.json").write_text("old")
    (tmp_path / "link.json").symlink_to("real.json")
    write_file(tmp_path / "link.json", b"new")
    assert (tmp_path / "link.json").is_symlink() and (tmp_path / "real.json").read_text() == "new"
    (tmp_path / "dangling.json").symlink_to("missing.json")
    write_file(tmp_path / "dangling.json", b"made")
    assert (tmp_path / "dangling.json").is_symlink() and (tmp_path / "missing.json").read_text() == "made"


def test_a_fifo_is_written_through_not_replaced(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    write_file(fifo, b"through")
    reader.join(10)
    assert got == [b"through"] and stat.S_ISFIFO(fifo.stat().st_mode)


def test_devices_are_written_through_and_a_full_one_is_a_clean_error():
    write_file("/dev/null", b"x")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    if os.path.exists("/dev/full"):
        with pytest.raises(DagplanError) as info:
            write_file("/dev/full", b"x")
        assert info.value.code == "io" and "No space left" in info.value.diagnostics[0].message
        assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


@pytest.mark.parametrize("name, code", [("", "usage"), ("a\0b", "usage")])
def test_names_that_cannot_be_files_are_usage_errors(name, code):
    with pytest.raises(DagplanError) as info:
        write_file(name, b"x")
    assert info.value.code == code


def test_a_directory_is_refused(tmp_path):
    with pytest.raises(DagplanError) as info:
        write_file(tmp_path, b"x")
    assert info.value.code == "io" and "directory" in info.value.diagnostics[0].message


def test_the_cli_outputs_go_through_it(tmp_path):
    """`run --record ''` and `runs export -o ''` are usage errors; `-o /dev/stdout` prints the cassette."""
    (tmp_path / "t.py").write_text("import dagplan\n@dagplan.tool\ndef one() -> int:\n    return 1\n")
    (tmp_path / "p.yaml").write_text("steps:\n  - {id: a, tool: one}\n")
    env = {**os.environ, "DAGPLAN_STATE_DIR": str(tmp_path / "s"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "dagplan", *args], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=60)  # fmt: skip

    assert cli("run", "p.yaml", "--tools", "t.py", "--record", "").returncode == 2
    (tmp_path / "real.json").write_text("")
    (tmp_path / "c.json").symlink_to("real.json")
    assert cli("run", "p.yaml", "--tools", "t.py", "--record", "c.json").returncode == 0
    assert (tmp_path / "c.json").is_symlink() and "dagplan_cassette" in (tmp_path / "real.json").read_text()
    run_id = cli("runs", "--format", "json").stdout.split('"id": "')[1].split('"')[0]
    assert cli("runs", "export", run_id, "-o", "").returncode == 2
    printed = cli("runs", "export", run_id, "-o", "/dev/stdout")
    assert printed.returncode == 0 and "dagplan_cassette" in printed.stdout
    (tmp_path / "plan.yaml").write_text("steps: [{id: a,   tool: one}]\n")
    (tmp_path / "plan-link.yaml").symlink_to("plan.yaml")
    assert cli("fmt", "-w", "plan-link.yaml").returncode == 0
    assert (tmp_path / "plan-link.yaml").is_symlink() and "id: a" in (tmp_path / "plan.yaml").read_text()
