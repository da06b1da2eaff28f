"""A PostgreSQL server of its own for tests and benchmarks: Debian's binaries, initdb + pg_ctl, a free port.

PostgreSQL refuses to run as root: as root the server runs as the ``postgres`` user, in a folder
under /tmp that user can reach.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Callable


def start_postgres(settings: str = "") -> tuple[str, Callable[[], None], str]:
    """Start a server; returns its TCP URL (no database name: append ``/postgres``), a function stopping it,
    and the URL of its database ``postgres`` over its Unix socket. ``settings``: more ``-c name=value`` options
    (a benchmark's statistics)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb")) or [shutil.which("initdb") or ""]
    initdb = found[-1]
    if not initdb or not os.path.exists(initdb):
        raise RuntimeError("PostgreSQL is not installed (.ci/run installs Debian's postgresql where it is missing)")
    bindir = os.path.dirname(initdb)
    folder = Path(tempfile.mkdtemp(prefix="dagplan-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    data = folder / "data"
    subprocess.run([*as_user, initdb, "-D", str(data), "-A", "trust", "-U", "postgres"], check=True,
                   capture_output=True)  # fmt: skip
    options = f"-k {folder} -p {port} -c listen_addresses=127.0.0.1 {settings}".rstrip()
    subprocess.run([*as_user, f"{bindir}/pg_ctl", "-D", str(data), "-o", options, "-l", str(folder / "log"), "-w",
                    "start"], check=True, capture_output=True)  # fmt: skip

    def stop() -> None:
        subprocess.run([*as_user, f"{bindir}/pg_ctl", "-D", str(data), "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)

    return f"postgresql://postgres@127.0.0.1:{port}", stop, f"postgresql://postgres@/postgres?host={folder}&port={port}"
