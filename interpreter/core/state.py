"""Which state holds the runs: the one rule choosing it (given, ``$DAGPLAN_STATE``, the configuration's)
and the check of a state given as text. The registry factory (:mod:`..stores.registry`) opens what this chose;
the configuration checks its ``state`` key here, without importing any store.
"""

from __future__ import annotations

import os
import re
from typing import Any

from ...dsl.errors import did_you_mean
from .redact import masked

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):")
DATABASE_SCHEMES = ("postgresql", "postgres")


def state_problem(state: Any) -> tuple[str, str | None] | None:
    """What is wrong with a state given as text (message, hint), or None: a directory path, or a
    ``postgresql://`` URL that can be connected to. Another scheme (``sqlite:///x.db``), a typo
    (``postgresql:/db``), a port out of range, an unclosed ``[``, a bad ``%`` escape, a NUL byte: each is
    refused here, never turned into a directory of that name."""
    if not isinstance(state, str):
        return None
    if not state or "\0" in state:
        return "a state is a directory path or a postgresql:// URL, not " + repr(state), None
    scheme = _SCHEME.match(state)
    if scheme is None:
        return None  # a directory path
    if scheme.group(1).lower() not in DATABASE_SCHEMES:
        hint = did_you_mean(scheme.group(1).lower(), DATABASE_SCHEMES, "runs are kept in a directory or in PostgreSQL")
        return f"unsupported state URL {masked(state)!r}: {scheme.group(1)} is not a run store", hint
    if not state.startswith(tuple(f"{s}://" for s in DATABASE_SCHEMES)):
        return f"{masked(state)!r} is not a URL", "write postgresql://user@host/db"
    from urllib.parse import urlsplit

    try:
        urlsplit(state).port  # noqa: B018 - parsing is the check: brackets, port range
    except ValueError as exc:
        return f"state URL {masked(state)!r}: {exc}", "e.g. postgresql://user@127.0.0.1:5432/db"
    if re.search(r"%(?![0-9A-Fa-f]{2})", state):
        return f"state URL {masked(state)!r} has a bad %-escape", "write % as %25"
    return None


def is_url(state: Any) -> bool:
    """Whether a state names a PostgreSQL database."""
    return isinstance(state, str) and state.startswith(tuple(f"{s}://" for s in DATABASE_SCHEMES))


def chosen_state(given: Any = None, configured: Any = None) -> Any:
    """Where runs are, the one rule for every door (the CLI's ``--state`` reads the same variables): the
    state given, else ``$DAGPLAN_STATE`` (a directory or a URL), else ``$DAGPLAN_STATE_DIR``, else the
    configuration's ``state``; None leaves the file store's default (./.dagplan). The environment wins over
    the file, as it does for every setting a deployment overrides."""
    if given is not None:
        return given
    return os.environ.get("DAGPLAN_STATE") or os.environ.get("DAGPLAN_STATE_DIR") or configured
