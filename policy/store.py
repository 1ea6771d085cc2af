"""Where the policy's learning lives: a small interface and two stores (SQLite, memory).

The state is per-arm SUMS (policy.types.ArmStats), and an update is an increment: add x x^T to
xtx, r x to xty, one to the counts. Increments commute, so several writers can share one state
by adding to it inside a transaction; nobody ever writes a derived value (A^-1, theta) that
would overwrite another writer's work. SQLiteStore does this for processes on one host (one
file, BEGIN IMMEDIATE serialises the read-add-write); a server store (e.g. PostgreSQL with the
same two tables and `UPDATE ... SET pulls = pulls + 1, ...`) does it for replicas on several
hosts, behind the same interface (docs/policy.md, "State store").

A state file this store cannot use (not SQLite, damaged, another program's tables, another
schema version, another context layout, actions the catalogue does not have) is refused with a
ConfigError naming it and moved aside to <name>.corrupt-<timestamp> with its WAL: never written
to, never overwritten.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn, Protocol

import numpy as np

from ragmend.errors import ConfigError
from ragmend.policy.types import ArmStats, PolicyState, frozen_array

SQLITE_SCHEMA_VERSION = 1


class PolicyStore(Protocol):
    def load(self, feature_names: Sequence[str], arms: Sequence[str]) -> PolicyState:
        """The stored state (every stored arm; `arms` not yet stored start at zero).

        The first load of an empty store records the context layout; a later load with another
        layout raises ConfigError (the sums would mean nothing under it)."""
        ...

    def apply(self, arm: str, x: np.ndarray, reward: float, success: bool) -> ArmStats:
        """Add one observation atomically and durably; returns the arm's sums after it
        (which include other writers' increments when the store is shared)."""
        ...

    def export_state(self) -> PolicyState: ...

    def import_state(self, state: PolicyState) -> None:
        """Replace everything (layout and arms) with `state`, atomically."""
        ...

    def reset(self) -> None:
        """Forget every arm and the layout; the next load starts from zero."""
        ...

    def close(self) -> None: ...


class MemoryStore:
    """No persistence: evaluation runs, benchmarks, tests."""

    shared = False  # nobody else writes to it

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._names: tuple[str, ...] | None = None
        self._arms: dict[str, ArmStats] = {}

    def load(self, feature_names: Sequence[str], arms: Sequence[str]) -> PolicyState:
        with self._lock:
            self._names = check_layout(self._names, tuple(feature_names), "memory store")
            return with_arms(PolicyState(self._names, dict(self._arms)), arms)

    def apply(self, arm: str, x: np.ndarray, reward: float, success: bool) -> ArmStats:
        with self._lock:
            if self._names is None:
                raise RuntimeError("load() the store before applying updates")
            new = self._arms.get(arm, ArmStats.zero(len(self._names))).plus(x, reward, success)
            self._arms[arm] = new
            return new

    def export_state(self) -> PolicyState:
        with self._lock:
            return PolicyState(self._names or (), dict(self._arms))

    def import_state(self, state: PolicyState) -> None:
        with self._lock:
            self._names, self._arms = state.feature_names, dict(state.arms)

    def reset(self) -> None:
        with self._lock:
            self._names, self._arms = None, {}

    def close(self) -> None:
        pass


class SQLiteStore:
    """One SQLite file in WAL mode; every update is one transaction.

    synchronous=FULL fsyncs the WAL at each commit: an update acknowledged (apply returned)
    survives a kill -9 and a power loss. NORMAL would survive a killed process but not a lost
    machine, for a shorter commit. The connection is shared by the threads of one process
    under a lock; other processes open their own and meet on SQLite's file lock.
    """

    shared = True  # other processes on this host may write to the same file

    def __init__(self, path: Path | str, *, synchronous: str = "FULL", timeout_s: float = 30.0):
        if synchronous not in ("FULL", "NORMAL", "EXTRA"):
            raise ValueError(f"synchronous must be FULL, NORMAL or EXTRA, got {synchronous!r}")
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        try:
            self._open(synchronous, timeout_s)
        except _Unusable as e:
            self._set_aside(str(e))
        except sqlite3.DatabaseError as e:
            if _is_corrupt(e):
                self._set_aside(f"SQLite cannot read it ({e})")
            # Locked, unreadable directory, disk full...: the file may be fine, leave it where it is.
            self._close_quietly()
            raise ConfigError(f"policy state {self.path} cannot be opened: {e}") from e

    def _open(self, synchronous: str, timeout_s: float) -> None:
        # isolation_level=None: no implicit transactions; each write says BEGIN IMMEDIATE itself.
        self._db = sqlite3.connect(
            self.path, timeout=timeout_s, isolation_level=None, check_same_thread=False
        )
        self._db.execute(f"PRAGMA synchronous={synchronous}")
        self._db.execute(f"PRAGMA busy_timeout={int(timeout_s * 1000)}")
        with self._write() as db:
            # Inside the write transaction: two processes creating the same new file cannot both
            # see it empty, and nothing is created in a file that turns out to be foreign. The
            # first read of the file is here: "not a database" shows here.
            tables = {
                row[0]
                for row in db.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
                )
            }
            if not tables:
                db.execute(f"CREATE TABLE meta ({META_COLUMNS})")
                db.execute(f"CREATE TABLE arms ({ARMS_COLUMNS})")
                db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SQLITE_SCHEMA_VERSION),))
            else:
                self._check_schema(db, tables)
        # Only once the file is known to be ours: switching the journal mode rewrites its header.
        self._db.execute("PRAGMA journal_mode=WAL")

    def _check_schema(self, db: sqlite3.Connection, tables: set[str]) -> None:
        """Raise _Unusable unless the file holds exactly this store's tables at this version."""
        if tables != {"meta", "arms"}:
            raise _Unusable(f"it holds the tables {sorted(tables)}, not a policy state's (arms, meta)")
        for table, want in (("meta", META_COLUMNS), ("arms", ARMS_COLUMNS)):
            got = tuple(row[1] for row in db.execute(f"PRAGMA table_info({table})"))
            if got != _column_names(want):
                raise _Unusable(f"its {table} table has the columns {list(got)}, not this store's")
        version = self._meta(db, "schema_version")
        if version != str(SQLITE_SCHEMA_VERSION):
            raise _Unusable(
                f"it has schema version {version!r} and this ragmend reads {SQLITE_SCHEMA_VERSION}"
            )

    def _set_aside(self, reason: str) -> NoReturn:
        """Close the file, move it out of the way (kept, never overwritten) and refuse it."""
        self._close_quietly()
        aside = set_aside(self.path)
        raise ConfigError(
            f"policy state {self.path} was refused: {reason}. It was moved to {aside} (kept as it was); "
            f"the next start begins with an empty policy state at {self.path}. To keep what it learned, "
            "move it back under a configuration that matches it and `ragmend policy export` it"
        )

    def _close_quietly(self) -> None:
        if self._db is not None:
            # A damaged file may fail the checkpoint that the last connection's close makes;
            # its WAL moves aside with it.
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
            self._db = None

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taken with the write lock at BEGIN so the read that follows
        (read-add-write of the sums) cannot interleave with another writer's."""
        with self._lock:
            db = self._connection()
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise

    def _connection(self) -> sqlite3.Connection:
        if self._db is None:
            raise RuntimeError(f"policy state {self.path} is closed")
        return self._db

    @staticmethod
    def _meta(db: sqlite3.Connection, key: str) -> str | None:
        row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    def _layout(self, db: sqlite3.Connection) -> tuple[str, ...] | None:
        raw = self._meta(db, "feature_names")
        return None if raw is None else tuple(json.loads(raw))

    def load(self, feature_names: Sequence[str], arms: Sequence[str]) -> PolicyState:
        """The stored state; a file learned under another layout or other actions, or with
        damaged rows, is refused and moved aside (ConfigError), never written to."""
        names = tuple(feature_names)
        try:
            with self._write() as db:
                state = self._load_checked(db, names, tuple(arms))
        except _Unusable as e:
            self._set_aside(str(e))
        except sqlite3.DatabaseError as e:
            if _is_corrupt(e):
                self._set_aside(f"SQLite cannot read it ({e})")
            raise
        return with_arms(state, arms)

    def _load_checked(
        self, db: sqlite3.Connection, names: tuple[str, ...], arms: tuple[str, ...]
    ) -> PolicyState:
        try:
            stored = self._layout(db)
        except (ValueError, TypeError) as e:
            raise _Unusable(f"its context layout is not readable ({e})") from None
        if stored is not None and stored != names:
            raise _Unusable(_layout_mismatch(stored, names))
        stored_arms = [row[0] for row in db.execute("SELECT arm FROM arms ORDER BY arm")]
        if stored is None and stored_arms:
            raise _Unusable(f"it holds statistics of {stored_arms} but no context layout")
        # Same rule as an import (policy.exchange): every stored action must be one of ours (the
        # policy passes the whole catalogue, enabled or not). Ignoring an unknown one would drop
        # it from the next export without a word.
        unknown = [a for a in stored_arms if a not in arms]
        if unknown:
            raise _Unusable(
                f"it holds action(s) {unknown} that this ragmend does not have ({', '.join(arms)})"
            )
        if stored is None:
            db.execute("INSERT OR REPLACE INTO meta VALUES ('feature_names', ?)", (json.dumps(names),))
        try:
            return PolicyState(names, self._read_arms(db, len(names)))
        except (ValueError, TypeError) as e:  # a blob of the wrong size, a NULL where a count goes
            raise _Unusable(f"an arm's row is damaged ({e})") from None

    def apply(self, arm: str, x: np.ndarray, reward: float, success: bool) -> ArmStats:
        with self._write() as db:
            names = self._layout(db)
            if names is None:
                raise RuntimeError("load() the store before applying updates")
            dim = len(names)
            row = db.execute("SELECT * FROM arms WHERE arm = ?", (arm,)).fetchone()
            old = _decode(row, dim) if row else ArmStats.zero(dim)
            new = old.plus(np.asarray(x, dtype=np.float64), float(reward), success)
            self._put(db, arm, new)
        return new

    def export_state(self) -> PolicyState:
        with self._lock:
            db = self._connection()
            # One read transaction: the layout and every arm from the same snapshot.
            db.execute("BEGIN")
            try:
                names = self._layout(db) or ()
                arms = self._read_arms(db, len(names)) if names else {}
            finally:
                db.execute("COMMIT")
        return PolicyState(names, arms)

    def import_state(self, state: PolicyState) -> None:
        with self._write() as db:
            db.execute("DELETE FROM arms")
            db.execute(
                "INSERT OR REPLACE INTO meta VALUES ('feature_names', ?)", (json.dumps(state.feature_names),)
            )
            for arm, stats in state.arms.items():
                self._put(db, arm, stats)

    def reset(self) -> None:
        with self._write() as db:
            db.execute("DELETE FROM arms")
            db.execute("DELETE FROM meta WHERE key = 'feature_names'")

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    def _read_arms(self, db: sqlite3.Connection, dim: int) -> dict[str, ArmStats]:
        return {row[0]: _decode(row, dim) for row in db.execute("SELECT * FROM arms ORDER BY arm")}

    @staticmethod
    def _put(db: sqlite3.Connection, arm: str, s: ArmStats) -> None:
        db.execute(
            "INSERT OR REPLACE INTO arms VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                arm,
                s.pulls,
                s.reward_sum,
                s.successes,
                s.failures,
                np.ascontiguousarray(s.xtx, dtype="<f8").tobytes(),
                np.ascontiguousarray(s.xty, dtype="<f8").tobytes(),
                time.time(),
            ),
        )


def _decode(row: tuple, dim: int) -> ArmStats:
    _, pulls, reward_sum, successes, failures, xtx, xty, _ = row
    return ArmStats(
        pulls=int(pulls),
        reward_sum=float(reward_sum),
        successes=int(successes),
        failures=int(failures),
        xtx=frozen_array(np.frombuffer(xtx, dtype="<f8").reshape(dim, dim), (dim, dim)),
        xty=frozen_array(np.frombuffer(xty, dtype="<f8"), (dim,)),
    )


def _layout_mismatch(stored: tuple[str, ...], wanted: tuple[str, ...]) -> str:
    return (
        f"it was learned with {len(stored)} context features and this configuration builds "
        f"{len(wanted)} (or other ones; was policy.context_dim changed?)"
    )


def check_layout(stored: tuple[str, ...] | None, wanted: tuple[str, ...], where: str) -> tuple[str, ...]:
    if stored is not None and stored != wanted:
        raise ConfigError(
            f"policy state {where}: {_layout_mismatch(stored, wanted)}. Reset it or import an export"
        )
    return wanted


class _Unusable(Exception):
    """Internal: the file is not a state this store can use; the message says why."""


META_COLUMNS = "key TEXT PRIMARY KEY, value TEXT NOT NULL"
ARMS_COLUMNS = (
    "arm TEXT PRIMARY KEY, pulls INTEGER NOT NULL, reward_sum REAL NOT NULL, successes INTEGER NOT NULL, "
    "failures INTEGER NOT NULL, xtx BLOB NOT NULL, xty BLOB NOT NULL, updated_at REAL NOT NULL"
)


def _column_names(columns: str) -> tuple[str, ...]:
    return tuple(c.split()[0] for c in columns.split(", "))


def _is_corrupt(e: sqlite3.Error) -> bool:
    """SQLite says the file is damaged or not a database (not: locked, unopenable, disk full)."""
    code = getattr(e, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)


def set_aside(path: Path) -> Path:
    """Rename `path` (and its -wal / -shm) to a free <name>.corrupt-<UTC timestamp>[-n]; returns it.

    The WAL may hold committed transactions, so it moves too, to the name SQLite looks for beside
    the new one: the aside copy opens with everything in it. It moves first: a WAL left beside a
    new file at `path` could be replayed into it.
    """
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    for n in itertools.count():
        aside = path.with_name(f"{path.name}.corrupt-{stamp}" + (f"-{n}" if n else ""))
        if not any(Path(f"{aside}{suffix}").exists() for suffix in ("", "-wal", "-shm")):
            break
    for suffix in ("-wal", "-shm", ""):
        src = Path(f"{path}{suffix}")
        if src.exists():
            os.rename(src, f"{aside}{suffix}")
    return aside


def with_arms(state: PolicyState, arms: Sequence[str]) -> PolicyState:
    out = dict(state.arms)
    for arm in arms:
        out.setdefault(arm, ArmStats.zero(state.dim))
    return PolicyState(state.feature_names, out)
