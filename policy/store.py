"""Where the policy's learning lives: a small interface and two stores (SQLite, memory).

The state is per-arm SUMS (policy.types.ArmStats), and an update is an increment: add x x^T to
xtx, r x to xty, one to the counts. Increments commute, so several writers can share one state
by adding to it inside a transaction; nobody ever writes a derived value (A^-1, theta) that
would overwrite another writer's work. SQLiteStore does this for processes on one host (one
file, BEGIN IMMEDIATE serialises the read-add-write); a server store (e.g. PostgreSQL with the
same two tables and `UPDATE ... SET pulls = pulls + 1, ...`) does it for replicas on several
hosts, behind the same interface (docs/policy.md, "State store").
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

import numpy as np

from policy.types import ArmStats, PolicyState, frozen_array
from ragmend.errors import ConfigError

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

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._names: tuple[str, ...] | None = None
        self._arms: dict[str, ArmStats] = {}

    def load(self, feature_names: Sequence[str], arms: Sequence[str]) -> PolicyState:
        with self._lock:
            self._names = _check_layout(self._names, tuple(feature_names), "memory store")
            return _with_arms(PolicyState(self._names, dict(self._arms)), arms)

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

    def __init__(self, path: Path | str, *, synchronous: str = "FULL", timeout_s: float = 30.0):
        if synchronous not in ("FULL", "NORMAL", "EXTRA"):
            raise ValueError(f"synchronous must be FULL, NORMAL or EXTRA, got {synchronous!r}")
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        # isolation_level=None: no implicit transactions; each write says BEGIN IMMEDIATE itself.
        self._db = sqlite3.connect(
            self.path, timeout=timeout_s, isolation_level=None, check_same_thread=False
        )
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(f"PRAGMA synchronous={synchronous}")
        self._db.execute(f"PRAGMA busy_timeout={int(timeout_s * 1000)}")
        with self._write() as db:
            db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            db.execute(
                "CREATE TABLE IF NOT EXISTS arms (arm TEXT PRIMARY KEY, pulls INTEGER NOT NULL, "
                "reward_sum REAL NOT NULL, successes INTEGER NOT NULL, failures INTEGER NOT NULL, "
                "xtx BLOB NOT NULL, xty BLOB NOT NULL, updated_at REAL NOT NULL)"
            )
            version = self._meta(db, "schema_version")
            if version is None:
                db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SQLITE_SCHEMA_VERSION),))
            elif int(version) != SQLITE_SCHEMA_VERSION:
                raise ConfigError(
                    f"policy state {self.path} has schema version {version}, this ragmend reads "
                    f"{SQLITE_SCHEMA_VERSION}"
                )

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taken with the write lock at BEGIN so the read that follows
        (read-add-write of the sums) cannot interleave with another writer's."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise

    @staticmethod
    def _meta(db: sqlite3.Connection, key: str) -> str | None:
        row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    def _layout(self, db: sqlite3.Connection) -> tuple[str, ...] | None:
        raw = self._meta(db, "feature_names")
        return None if raw is None else tuple(json.loads(raw))

    def load(self, feature_names: Sequence[str], arms: Sequence[str]) -> PolicyState:
        names = tuple(feature_names)
        with self._write() as db:
            stored = self._layout(db)
            _check_layout(stored, names, str(self.path))
            if stored is None:
                db.execute("INSERT OR REPLACE INTO meta VALUES ('feature_names', ?)", (json.dumps(names),))
            state = PolicyState(names, self._read_arms(db, len(names)))
        return _with_arms(state, arms)

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
            # One read transaction: the layout and every arm from the same snapshot.
            self._db.execute("BEGIN")
            try:
                names = self._layout(self._db) or ()
                arms = self._read_arms(self._db, len(names)) if names else {}
            finally:
                self._db.execute("COMMIT")
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
            self._db.close()

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
        int(pulls),
        float(reward_sum),
        int(successes),
        int(failures),
        frozen_array(np.frombuffer(xtx, dtype="<f8").reshape(dim, dim), (dim, dim)),
        frozen_array(np.frombuffer(xty, dtype="<f8"), (dim,)),
    )


def _check_layout(stored: tuple[str, ...] | None, wanted: tuple[str, ...], where: str) -> tuple[str, ...]:
    if stored is not None and stored != wanted:
        raise ConfigError(
            f"policy state {where} was learned with {len(stored)} context features and this configuration "
            f"builds {len(wanted)} (or other ones): policy.context_dim changed? Export it and start a new "
            "policy.state_path, or reset the policy state"
        )
    return wanted


def _with_arms(state: PolicyState, arms: Sequence[str]) -> PolicyState:
    out = dict(state.arms)
    for arm in arms:
        out.setdefault(arm, ArmStats.zero(state.dim))
    return PolicyState(state.feature_names, out)
