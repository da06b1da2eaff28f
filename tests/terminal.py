"""Run a command on a pseudo-terminal and answer its first prompt, as a person at a keyboard would."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import time
from pathlib import Path


def run_on_terminal(
    argv: list[str], *, cwd: Path, env: dict, prompt: bytes, answer: bytes, timeout: float = 60
) -> tuple[str, int, bool]:
    """(everything printed, exit code, whether the prompt was seen and answered)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env, close_fds=True)
    os.close(slave)
    seen, answered, deadline = b"", False, time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the other side closed
                break
            if not chunk:
                break
            seen += chunk
        if not answered and prompt in seen:
            os.write(master, answer + b"\n")
            answered = True
        if proc.poll() is not None and not ready:
            break
    proc.wait(timeout=30)
    os.close(master)
    return seen.decode("utf-8", "replace"), proc.returncode, answered
