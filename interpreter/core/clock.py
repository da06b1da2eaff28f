"""The engine's clock for deadlines (a gate's ``timeout``): wall time, moved by ``DAGPLAN_CLOCK_OFFSET``.

Tests move the clock instead of sleeping (``DAGPLAN_CLOCK_OFFSET=7200`` runs a resume two hours later), so no
test depends on how fast the machine is; a run's deadline is kept in its journal as a wall-clock time, so
every process that resumes it agrees on it.
"""

from __future__ import annotations

import os
import time

from ...dsl.errors import RunError

OFFSET = "DAGPLAN_CLOCK_OFFSET"


def now() -> float:
    """Seconds since the epoch, as the engine's deadlines count them."""
    given = os.environ.get(OFFSET)
    if not given:
        return time.time()
    try:
        offset = float(given)
    except ValueError:
        offset = float("nan")
    if offset != offset or abs(offset) > 10 * 365 * 86400:  # NaN, inf, or more than ten years
        raise RunError.make("config", f"{OFFSET}={given!r} is not a number of seconds",
                            hint=f"unset {OFFSET} (it exists for tests), or give seconds, e.g. 3600")  # fmt: skip
    return time.time() + offset
