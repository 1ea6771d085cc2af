"""`ragmend db ...`: the shared PostgreSQL store's schema (store.kind: postgres; ragmend/pg.py)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from ragmend.cli.common import err, run, settings

db_app = typer.Typer(
    help="The shared PostgreSQL store: its schema version, and the migrations that bring it up to date.\n\n"
    "Example: RAGMEND_STORE__DSN=postgresql://ragmend@db/ragmend ragmend db migrate",
    no_args_is_help=True,
)

DsnOption = Annotated[
    str | None,
    typer.Option("--dsn", help="The database (default: store.dsn of the configuration, RAGMEND_STORE__DSN)."),
]


def _dsn(dsn: str | None) -> str:
    from ragmend.errors import ConfigError

    if dsn:
        return dsn
    s = settings().store
    if s.dsn is None:
        raise ConfigError("no database: pass --dsn or set store.dsn (RAGMEND_STORE__DSN)")
    return s.dsn.get_secret_value()


@db_app.command("migrate")
def db_migrate(dsn: DsnOption = None) -> None:
    """Create or upgrade ragmend's tables (each step once, in its own transaction; safe to run
    from several replicas at once).

    Example: ragmend db migrate --dsn postgresql://ragmend@localhost/ragmend
    """
    from ragmend import pg

    def work() -> None:
        target = _dsn(dsn)
        conn = pg.connect(target)
        try:
            before = pg.schema_version(conn)
            applied = pg.migrate(conn)
            after = pg.schema_version(conn)
        finally:
            conn.close()
        for m in applied:
            err.print(f"applied {m.version}: {m.description}")
        print(
            json.dumps(
                {"database": pg.describe(target), "from": before, "to": after, "applied": len(applied)}
            )
        )

    run(work)


@db_app.command("status")
def db_status(dsn: DsnOption = None) -> None:
    """The schema version of the database and the one this ragmend reads (exit 2 when they differ).

    Example: ragmend db status
    """
    from ragmend import pg
    from ragmend.errors import ConfigError

    def work() -> None:
        target = _dsn(dsn)
        conn = pg.connect(target)
        try:
            version = pg.schema_version(conn)
        finally:
            conn.close()
        print(json.dumps({"database": pg.describe(target), "version": version, "reads": pg.SCHEMA_VERSION}))
        if version != pg.SCHEMA_VERSION:
            missing = ", ".join(f"{m.version} ({m.description})" for m in pg.pending(version))
            raise ConfigError(
                f"the schema is at {version}, this ragmend reads {pg.SCHEMA_VERSION}: {missing or 'newer'}"
            )

    run(work)
