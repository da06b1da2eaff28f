"""Is a lock complete? Every dependency (with its extras, under this platform's markers) of every package a
requirements/*.txt installs is itself in that file, at a version that satisfies it.

The locks are installed with ``pip install --no-deps --require-hashes`` (pip never resolves anew, so a
release published since cannot change what installs), and ``--no-deps`` would hide a hole the resolver used
to catch: this is the check that replaces it. It reads each package's requirements from the installed
distribution of the locked version (the test environment installs test.txt, and every other lock takes
test.txt's versions: scripts/lock), so it needs no network.

    python scripts/lockcheck.py [requirements/NAME.txt ...]     # exit 1 and one line a hole

Used by tests/test_locks.py and scripts/check-fresh.
"""

from __future__ import annotations

import re
import sys
import tomllib
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Callable, Iterable

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
# which of pyproject.toml's extras each lock installs (and requirements/build.in, what the package builds with)
EXTRAS = {
    "main": (),
    "test": ("test",),
    "local": ("local",),
    "serve": ("serve",),
    "docs": ("docs",),
    "test-core": ("test-core",),
}
_ENTRY = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)\s*(?:;\s*([^\\]+?))?\s*\\?\s*$")


def normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Entry:
    name: str
    version: str
    marker: str | None
    line: int


def entries(text: str) -> list[Entry]:
    """The pins of a lock, with their markers and line numbers."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        match = _ENTRY.match(line)
        if match:
            found.append(Entry(normal(match.group(1)), match.group(2), match.group(3), number))
    return found


def applies(marker: str | Marker | None, extra: str = "") -> bool:
    if marker is None:
        return True
    return (marker if isinstance(marker, Marker) else Marker(marker)).evaluate({"extra": extra})


def roots(lock_name: str, root: Path = ROOT) -> list[Requirement]:
    """What the lock was compiled for: the package's dependencies, its extras for this lock (followed through
    ``dagplan[...]``), and requirements/build.in."""
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    optional = project.get("optional-dependencies", {})
    wanted: list[Requirement] = [Requirement(r) for r in project.get("dependencies", [])]
    todo, seen = list(EXTRAS.get(lock_name, ())), set()
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for text in optional.get(extra, []):
            req = Requirement(text)
            if normal(req.name) == normal(project["name"]):
                todo.extend(req.extras)
            else:
                wanted.append(req)
    build = root / "requirements" / "build.in"
    if build.exists():
        wanted += [Requirement(r) for r in build.read_text().splitlines() if r.strip() and not r.startswith("#")]
    return wanted


Requires = Callable[[str, str], "list[str] | None"]


def installed_requires(name: str, version: str) -> list[str] | None:
    """A locked package's requirements, from its installed distribution; None when the installed version is
    not the locked one (the metadata would be another release's)."""
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return None
    if Version(dist.version) != Version(version):
        return None
    return list(dist.requires or [])


def holes(text: str, lock_name: str, requires: Requires = installed_requires, root: Path = ROOT) -> list[str]:
    """Every requirement of the lock's packages (on this platform) that the lock does not satisfy, one line each."""
    pinned: dict[str, Entry] = {}
    for entry in entries(text):
        if applies(entry.marker):
            pinned[entry.name] = entry
    problems: list[str] = []
    extras: dict[str, set[str]] = {}
    todo: list[tuple[str, Requirement]] = [("the project", r) for r in roots(lock_name, root)]
    while todo:
        who, req = todo.pop()
        if req.marker is not None and not applies(req.marker):  # only the roots keep theirs
            continue
        name = normal(req.name)
        entry = pinned.get(name)
        if entry is None:
            problems.append(f"{name} ({req}) is required by {who} but is not in the lock")
            continue
        if not req.specifier.contains(entry.version, prereleases=True):
            problems.append(f"{name}=={entry.version} (line {entry.line}) does not satisfy {who}'s {req}")
        new = set(req.extras) - extras.get(name, set())
        first = name not in extras
        extras.setdefault(name, set()).update(req.extras)
        if not first and not new:
            continue
        found = requires(name, entry.version)
        if found is None:
            problems.append(f"{name}=={entry.version}: no metadata of this version here to check its requirements")
            continue
        for text_req in found:
            dep = Requirement(text_req)
            base = dep.marker is None or applies(dep.marker)
            # the package's own requirements are followed once; an extra's when that extra is first asked for
            if (first and base) or (dep.marker is not None and any(applies(dep.marker, e) for e in new)):
                todo.append((f"{name}=={entry.version}", _without_marker(dep)))
    return sorted(set(problems))


def _without_marker(req: Requirement) -> Requirement:
    req = Requirement(str(req))
    req.marker = None
    return req


def main(paths: Iterable[str]) -> int:
    paths = list(paths) or [str(p) for p in sorted((ROOT / "requirements").glob("*.txt"))]
    bad = 0
    for path in paths:
        lock = Path(path)
        found = holes(lock.read_text(), lock.stem)
        for line in found:
            print(f"{lock}: {line}")
        bad += len(found)
        if not found:
            print(f"{lock}: complete ({len(entries(lock.read_text()))} pins)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
