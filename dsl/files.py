"""How dagplan writes a file, the one rule: ``fmt -w``, ``plan -o``, ``run --record``, ``runs export -o``,
and the run store's own files all go through :func:`write_file`.

A regular file (or a missing one) is replaced atomically: a temporary file beside it, fsync, rename, fsync of
the directory, so a crash leaves the old file or the new one, whole, and the file keeps its permissions.
Anything else named as an output is written *through*, never replaced: a symlink is followed (its target is
replaced atomically, the link stays a link), and a FIFO, ``/dev/stdout`` or another device is opened and
written as it is (renaming over it would turn it into a regular file, or, as root, replace a device node).
A directory, an empty name or a name holding a NUL byte is refused with a clear error.

A file that must be new (``dagplan init``'s) is created by :func:`create_file`: anything already at the
name, a dangling symlink included, is left alone (``O_EXCL``: a link is never followed out of the folder).
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from .errors import DagplanError, error


_SURROGATE = re.compile("[\ud800-\udfff]")


def json_safe(text: str) -> str:
    """A JSON text with every lone surrogate (a file name from ``os.fsdecode``, a string a model or a person
    wrote) spelled as its ``\\uXXXX`` escape: UTF-8 can encode it, a database can store it, and
    ``json.loads`` gives back exactly the same value. Surrogates only ever stand inside JSON strings."""
    if _SURROGATE.search(text) is None:
        return text
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def write_file(path: str | os.PathLike, data: bytes, *, what: str = "file") -> None:
    """Write ``data`` to ``path`` by the rule above; a problem is a :class:`DagplanError` (``usage`` for a
    name that cannot be a file, ``io`` for the system's refusal), never an ``OSError``."""
    name = os.fspath(path)
    if not name or "\0" in name:
        raise DagplanError(error("usage", f"{name!r} cannot name a {what}", hint="give a file path"))
    try:
        try:
            mode = os.stat(name).st_mode  # through symlinks: the kind of file it names
        except FileNotFoundError:
            mode = None
        if mode is not None and stat.S_ISDIR(mode):
            raise DagplanError(error("io", f"cannot write the {what} {name!r}: it is a directory"))
        if mode is None or stat.S_ISREG(mode):  # a symlink (a chain of them): the file it points to
            target = Path(os.path.realpath(name))
            replace_atomically(target, data, stat.S_IMODE(mode) if mode is not None else 0o644)
        else:  # a FIFO, a character device (/dev/stdout), a socket: written through, never replaced
            with open(name, "wb") as f:
                f.write(data)
    except OSError as exc:
        raise DagplanError(error("io", f"cannot write the {what} {name!r}: {exc.strerror or exc}")) from None


def create_file(path: str | os.PathLike, data: bytes, *, what: str = "file") -> None:
    """Create ``path`` holding ``data``; a :class:`DagplanError` (``io``) when anything is there already,
    a symlink (dangling or not) included, never written through."""
    name = os.fspath(path)
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    except FileExistsError:
        raise DagplanError(error("io", f"cannot create the {what} {name!r}: something is there already")) from None
    except OSError as exc:
        raise DagplanError(error("io", f"cannot create the {what} {name!r}: {exc.strerror or exc}")) from None
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except OSError as exc:
        raise DagplanError(error("io", f"cannot write the {what} {name!r}: {exc.strerror or exc}")) from None
    finally:
        os.close(fd)


def replace_atomically(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Temporary file beside ``path``, fsync, rename over it, fsync of the directory (raises ``OSError``)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def fsync_dir(path: Path) -> None:
    """Make a rename in directory ``path`` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
