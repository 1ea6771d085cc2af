"""PostgreSQL for the state replicas share (`store: {kind: postgres, dsn: ...}`): connections,
the versioned schema and its migrations, and errors that say what the database lacks.

The schema is versioned in `ragmend_schema` (one row per component); `ragmend db migrate` applies
what is missing, each step in its own transaction under an advisory lock, so two replicas
migrating at once apply each step once. A server never migrates on its own: it refuses to start
on a schema older (or newer) than the one it reads, naming the command to run.

psycopg (3) is imported lazily: the embedded default (files) does not need it.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ragmend.errors import ConfigError, StoreUnavailable

if TYPE_CHECKING:
    import psycopg

INSTALL_HINT = "PostgreSQL support needs psycopg: pip install 'ragmend[postgres]' (psycopg[binary])"
# Two replicas running `ragmend db migrate` at once take turns on this advisory lock (any number
# that no other program of the database uses for one: "ragmend" in ASCII).
MIGRATION_LOCK = 0x7261676D656E64


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    statements: tuple[str, ...]


# The policy's additive sums, per namespace (a collection's own policy, or "default"): one row per
# arm; xtx is the d*d matrix row-major, xty the vector, both float8[] so that an update is one
# `UPDATE ... SET xtx = elementwise sum` and never a read-add-write in the client.
MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "policy statistics",
        (
            """CREATE TABLE ragmend_policy_meta (
                namespace TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
                PRIMARY KEY (namespace, key))""",
            """CREATE TABLE ragmend_policy_arms (
                namespace TEXT NOT NULL, arm TEXT NOT NULL,
                pulls BIGINT NOT NULL, reward_sum DOUBLE PRECISION NOT NULL,
                successes BIGINT NOT NULL, failures BIGINT NOT NULL,
                xtx DOUBLE PRECISION[] NOT NULL, xty DOUBLE PRECISION[] NOT NULL,
                updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
                PRIMARY KEY (namespace, arm))""",
            # Elementwise a + b of two equally long arrays (the increment of xtx and xty).
            """CREATE FUNCTION ragmend_add(a DOUBLE PRECISION[], b DOUBLE PRECISION[])
                RETURNS DOUBLE PRECISION[] LANGUAGE sql IMMUTABLE STRICT AS $$
                SELECT array_agg(x + y ORDER BY i) FROM unnest(a, b) WITH ORDINALITY AS t(x, y, i)
                $$""",
        ),
    ),
    # The index (rag/pgindex.py): chunks and vectors in PGVectorStore's table per namespace
    # (created by it on first write), the generations and the current one here.
    Migration(
        2,
        "index generations (pgvector)",
        (
            "CREATE EXTENSION IF NOT EXISTS vector",
            """CREATE TABLE ragmend_index_generations (
                namespace TEXT NOT NULL, generation INTEGER NOT NULL, manifest JSONB NOT NULL,
                created TIMESTAMPTZ NOT NULL DEFAULT now(), PRIMARY KEY (namespace, generation))""",
            """CREATE TABLE ragmend_index_current (
                namespace TEXT PRIMARY KEY, generation INTEGER NOT NULL)""",
        ),
    ),
    # The knowledge graph (kg/pggraph.py): kg/graphdb.py's SQLite tables with a namespace column.
    Migration(
        3,
        "knowledge graph",
        (
            """CREATE TABLE ragmend_kg_meta (
                namespace TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
                PRIMARY KEY (namespace, key))""",
            """CREATE TABLE ragmend_kg_docs (
                namespace TEXT NOT NULL, doc_id TEXT NOT NULL, fingerprint TEXT NOT NULL,
                PRIMARY KEY (namespace, doc_id))""",
            """CREATE TABLE ragmend_kg_phrases (
                id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, namespace TEXT NOT NULL,
                text TEXT NOT NULL, vec BYTEA NOT NULL, UNIQUE (namespace, text))""",
            """CREATE TABLE ragmend_kg_triples (
                id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, namespace TEXT NOT NULL,
                doc_id TEXT NOT NULL, node_id TEXT NOT NULL, subject TEXT NOT NULL,
                relation TEXT NOT NULL, object TEXT NOT NULL, negated INTEGER NOT NULL,
                numbers TEXT NOT NULL, sentence TEXT NOT NULL,
                subject_start INTEGER NOT NULL, subject_end INTEGER NOT NULL,
                object_start INTEGER NOT NULL, object_end INTEGER NOT NULL,
                subject_id BIGINT NOT NULL, relation_id BIGINT NOT NULL, object_id BIGINT NOT NULL)""",
            "CREATE INDEX ragmend_kg_triples_by_doc ON ragmend_kg_triples (namespace, doc_id)",
        ),
    ),
    # Collections created over the admin API (engine/collections.py); declared ones are in the
    # configuration. Each collection's index, graph and (own) policy use its name as namespace.
    Migration(
        4,
        "collections",
        (
            """CREATE TABLE ragmend_collections (
                name TEXT PRIMARY KEY, spec JSONB NOT NULL,
                created TIMESTAMPTZ NOT NULL DEFAULT now())""",
        ),
    ),
    # The answers users may vote on (policy/feedback.py): the repair decision behind each, so a
    # vote received by any replica credits the arm that decided it.
    Migration(
        5,
        "feedback",
        (
            """CREATE TABLE ragmend_feedback (
                response_id TEXT PRIMARY KEY, namespace TEXT NOT NULL, arm TEXT, context TEXT,
                cost_factor DOUBLE PRECISION NOT NULL, created TIMESTAMPTZ NOT NULL,
                score DOUBLE PRECISION, comment TEXT, voted TIMESTAMPTZ)""",
            "CREATE INDEX ragmend_feedback_by_created ON ragmend_feedback (created)",
        ),
    ),
    # The first-pass plan behind an answer (engine/router.py), which a vote credits too when the
    # reply is that pass's own answer. The router's statistics live in the policy tables under
    # the namespace `<namespace>/router`.
    Migration(
        6,
        "feedback credits the router",
        (
            "ALTER TABLE ragmend_feedback ADD COLUMN plan TEXT, ADD COLUMN plan_context TEXT, "
            "ADD COLUMN plan_cost_factor DOUBLE PRECISION",
        ),
    ),
    # The chat client's message id an answer was shown under (server.message_id_header), which a
    # rating synced from that client names.
    Migration(
        7,
        "feedback by the client's message id",
        (
            "ALTER TABLE ragmend_feedback ADD COLUMN message_id TEXT",
            "CREATE INDEX ragmend_feedback_by_message ON ragmend_feedback (message_id)",
        ),
    ),
    # Who received each answer (a key's fingerprint: only they may vote on it), whether its
    # request let it teach, and whether its vote was learned (one key's share is measured on those).
    Migration(
        8,
        "votes tied to the key that received the answer",
        (
            "ALTER TABLE ragmend_feedback ADD COLUMN receiver TEXT, ADD COLUMN learn BOOLEAN, "
            "ADD COLUMN credited BOOLEAN",
            "CREATE INDEX ragmend_feedback_by_credit ON ragmend_feedback (voted) WHERE credited",
        ),
    ),
)
SCHEMA_VERSION = MIGRATIONS[-1].version


def describe(dsn: str) -> str:
    """The DSN without its password, for messages and logs."""
    out = re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", dsn)
    return re.sub(r"(password\s*=\s*)\S+", r"\1***", out)


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError as e:
        raise ConfigError(INSTALL_HINT) from e
    return psycopg


def connect(dsn: str, timeout_s: float = 10.0) -> psycopg.Connection:
    """A connection, or StoreUnavailable saying why, without the password. Autocommit: every
    `with conn.transaction()` is then a transaction of its own (not a savepoint inside one left
    open by an earlier statement), and a lone statement commits at once."""
    psycopg = _psycopg()
    try:
        return psycopg.connect(dsn, connect_timeout=max(1, int(timeout_s)), autocommit=True)
    except psycopg.OperationalError as e:
        raise StoreUnavailable(f"PostgreSQL at {describe(dsn)} cannot be reached: {_first_line(e)}") from None
    except psycopg.ProgrammingError as e:  # a malformed DSN
        raise ConfigError(
            f"store.dsn {describe(dsn)} is not a valid PostgreSQL DSN: {_first_line(e)}"
        ) from None


def schema_version(conn: psycopg.Connection) -> int:
    """The version the database's ragmend schema is at (0: none)."""
    with conn.transaction():
        exists = conn.execute("SELECT to_regclass('ragmend_schema') IS NOT NULL").fetchone()
        if not exists or not exists[0]:
            return 0
        row = conn.execute("SELECT version FROM ragmend_schema WHERE component = 'ragmend'").fetchone()
    return int(row[0]) if row else 0


def migrate(conn: psycopg.Connection, target: int = SCHEMA_VERSION) -> list[Migration]:
    """Apply the missing migrations up to `target`, each in its own transaction; returns those
    applied (none when the schema is current). Permission errors name what is missing."""
    psycopg = _psycopg()
    applied: list[Migration] = []
    for m in MIGRATIONS:
        if m.version > target:
            break
        try:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS ragmend_schema "
                    "(component TEXT PRIMARY KEY, version INTEGER NOT NULL)"
                )
                row = conn.execute(
                    "SELECT version FROM ragmend_schema WHERE component = 'ragmend'"
                ).fetchone()
                current = int(row[0]) if row else 0
                if current >= m.version:
                    continue
                for sql in m.statements:
                    conn.execute(sql)
                conn.execute(
                    "INSERT INTO ragmend_schema VALUES ('ragmend', %s) "
                    "ON CONFLICT (component) DO UPDATE SET version = EXCLUDED.version",
                    (m.version,),
                )
        except (psycopg.errors.UndefinedFile, psycopg.errors.FeatureNotSupported) as e:
            raise ConfigError(
                f"migration {m.version} ({m.description}) needs the pgvector extension, which the "
                f"PostgreSQL server does not have: {_first_line(e)}. Install it on the server (Debian: "
                "postgresql-<version>-pgvector; or an image that ships it, such as pgvector/pgvector)"
            ) from None
        except psycopg.errors.InsufficientPrivilege as e:
            raise ConfigError(
                f"migration {m.version} ({m.description}) needs a privilege the database user lacks: "
                f"{_first_line(e)}. Run `ragmend db migrate` as a user that may CREATE in the schema "
                "(or GRANT CREATE ON SCHEMA public TO <user>)"
            ) from None
        applied.append(m)
    return applied


def require_current(conn: psycopg.Connection, dsn: str) -> None:
    """ConfigError unless the schema is exactly the one this ragmend reads."""
    version = schema_version(conn)
    if version < SCHEMA_VERSION:
        raise ConfigError(
            f"PostgreSQL at {describe(dsn)} has ragmend schema version {version} and this ragmend needs "
            f"{SCHEMA_VERSION}: run `ragmend db migrate`"
        )
    if version > SCHEMA_VERSION:
        raise ConfigError(
            f"PostgreSQL at {describe(dsn)} has ragmend schema version {version}, written by a newer "
            f"ragmend; this one reads {SCHEMA_VERSION}. Upgrade this replica"
        )


def _first_line(e: BaseException) -> str:
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


@contextlib.contextmanager
def reconnecting(conn_box: list[psycopg.Connection | None], dsn: str, timeout_s: float) -> Iterator[Any]:
    """The boxed connection, (re)opened when missing or broken; a broken one is dropped after the
    error so the next call reconnects (a restarted database, a failover)."""
    psycopg = _psycopg()
    conn = conn_box[0]
    if conn is None or conn.closed or conn.broken:
        conn = conn_box[0] = connect(dsn, timeout_s)
    try:
        yield conn
    except psycopg.OperationalError as e:
        with contextlib.suppress(Exception):
            conn.close()
        conn_box[0] = None
        raise StoreUnavailable(f"PostgreSQL at {describe(dsn)}: {_first_line(e)}") from None


@contextlib.contextmanager
def sqlalchemy_unavailable(dsn: str) -> Iterator[None]:
    """StoreUnavailable for what llama-index's PostgreSQL vector store raises (through SQLAlchemy)
    while the database cannot serve: restarting, failing over, unreachable."""
    from sqlalchemy import exc

    try:
        yield
    except exc.DBAPIError as e:
        unavailable = isinstance(e, (exc.OperationalError, exc.InterfaceError)) or e.connection_invalidated
        if not unavailable:
            raise
        raise StoreUnavailable(f"PostgreSQL at {describe(dsn)}: {_first_line(e.orig or e)}") from None


class ProcessConnection:
    """The one connection a process keeps to the shared database for a store: used by one caller
    at a time (under its lock), reopened after it breaks (`reconnecting`), and checked against
    the schema this ragmend reads when the store opens."""

    def __init__(self, dsn: str, timeout_s: float):
        self.dsn = dsn
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._box: list[psycopg.Connection | None] = [None]
        with self.use() as conn:
            require_current(conn, dsn)

    @contextlib.contextmanager
    def use(self) -> Iterator[Any]:
        with self._lock, reconnecting(self._box, self.dsn, self.timeout_s) as conn:
            yield conn

    def close(self) -> None:
        with self._lock:
            conn, self._box[0] = self._box[0], None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()


def create_database(dsn: str, name: str, *, replace: bool = False, migrated: bool = True) -> str:
    """Create database `name` on the server `dsn` points at (dropping one of that name first with
    `replace`), migrate it unless told not to; returns its DSN (the same server and options)."""
    if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", name):
        raise ConfigError(f"database name {name!r}: lower-case letters, digits and _")
    conn = connect(dsn)
    try:
        if replace:
            conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")
    finally:
        conn.close()
    base, _, query = dsn.partition("?")
    url = f"{base.rsplit('/', 1)[0]}/{name}" + (f"?{query}" if query else "")
    if migrated:
        conn = connect(url)
        try:
            migrate(conn)
        finally:
            conn.close()
    return url


def pending(version: int) -> Sequence[Migration]:
    """The migrations a database at `version` lacks."""
    return [m for m in MIGRATIONS if m.version > version]
