"""``dagplan db``: the run database (PostgreSQL) behind ``state = "postgresql://..."``."""

from __future__ import annotations

import click

from ..dsl.errors import DagplanError
from .common import EXIT_USAGE, die, fail, state_dir_option


@click.group("db")
def db() -> None:
    """The run database: create or migrate its schema."""


@db.command("upgrade")
@state_dir_option
def upgrade(state_dir: str | None) -> None:
    """Create or migrate the schema of the PostgreSQL database runs are kept in (versioned; safe to rerun)."""
    from .. import pool
    from .common import project_of

    url = state_dir or project_of().config.state_dir  # a URL given or configured (the default folder has none)
    try:
        before, after = pool.db_upgrade(url)
    except DagplanError as exc:
        fail(exc)
    except ValueError as exc:
        die(str(exc), EXIT_USAGE)
    click.echo(f"schema version {after}" + (f" (was {before})" if before != after else " (up to date)"), err=True)
