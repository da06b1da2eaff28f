"""Where runs are kept: the factory opening the registry of the state that :mod:`..core.state` chose, a
directory (:mod:`.store`) or a PostgreSQL database (:mod:`.pgstore`). Kept apart from the journal protocol
(:mod:`.journal`), which every store implements and none of them should import back.
"""

from __future__ import annotations

import os
from typing import Any

from ...dsl.errors import RunError
from ..core.state import chosen_state, is_url, state_problem
from .journal import Registry


def open_registry(state: Any = None) -> Registry:
    """The registry for ``state``: a registry as given, else the state directory it names (or the default)."""
    if isinstance(state, Registry):
        return state
    state = chosen_state(state)
    problem = state_problem(state)
    if problem is not None:
        raise RunError.make("config", problem[0], hint=problem[1])
    if is_url(state):  # runs in PostgreSQL (psycopg is imported when the first connection is made)
        from .pgstore import PgRegistry

        return PgRegistry(state)
    from .store import RunStore

    return RunStore(os.path.expanduser(state) if isinstance(state, str) else state)
