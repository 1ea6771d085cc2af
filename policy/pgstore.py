"""The policy's sums in PostgreSQL, shared by every replica (policy/store.py has the interface).

An update is ONE statement: `INSERT ... ON CONFLICT DO UPDATE SET pulls = pulls + 1, xtx =
ragmend_add(xtx, x x^T), ...`, committed before `apply` returns. PostgreSQL serialises the row,
so concurrent replicas' increments all land (none overwrites another), and an acknowledged
update is in the database's WAL: a replica killed with SIGKILL a moment later loses nothing it
acknowledged. The schema comes from `ragmend db migrate` (ragmend/pg.py).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from ragmend import pg
from ragmend.errors import ConfigError
from ragmend.policy.store import check_layout, with_arms
from ragmend.policy.types import ArmStats, PolicyState, frozen_array

_UPSERT = """
INSERT INTO ragmend_policy_arms AS a
    (namespace, arm, pulls, reward_sum, successes, failures, xtx, xty, updated_at)
VALUES (%(ns)s, %(arm)s, 1, %(r)s, %(s)s, %(f)s, %(xtx)s, %(xty)s, now())
ON CONFLICT (namespace, arm) DO UPDATE SET
    pulls = a.pulls + 1,
    reward_sum = a.reward_sum + EXCLUDED.reward_sum,
    successes = a.successes + EXCLUDED.successes,
    failures = a.failures + EXCLUDED.failures,
    xtx = ragmend_add(a.xtx, EXCLUDED.xtx),
    xty = ragmend_add(a.xty, EXCLUDED.xty),
    updated_at = now()
RETURNING pulls, reward_sum, successes, failures, xtx, xty
"""


class PostgresStore:
    """The PolicyStore of replicas: one connection per process, used under a lock."""

    shared = True  # other processes write to the same sums: read them again within the bound

    def __init__(self, dsn: str, namespace: str = "default", *, timeout_s: float = 10.0):
        self.dsn = dsn
        self.namespace = namespace
        self.timeout_s = timeout_s
        self._db = pg.ProcessConnection(dsn, timeout_s)

    def __repr__(self) -> str:
        return f"PostgresStore({pg.describe(self.dsn)!r}, namespace={self.namespace!r})"

    def _layout(self, conn: Any) -> tuple[str, ...] | None:
        row = conn.execute(
            "SELECT value FROM ragmend_policy_meta WHERE namespace = %s AND key = 'feature_names'",
            (self.namespace,),
        ).fetchone()
        return None if row is None else tuple(json.loads(row[0]))

    def _arms(self, conn: Any, dim: int) -> dict[str, ArmStats]:
        rows = conn.execute(
            "SELECT arm, pulls, reward_sum, successes, failures, xtx, xty FROM ragmend_policy_arms "
            "WHERE namespace = %s ORDER BY arm",
            (self.namespace,),
        ).fetchall()
        return {row[0]: _decode(row[1:], dim) for row in rows}

    def load(self, feature_names: Sequence[str], arms: Sequence[str]) -> PolicyState:
        names = tuple(feature_names)
        with self._db.use() as conn, conn.transaction():
            stored = self._layout(conn)
            check_layout(stored, names, f"{self!r}")
            if stored is None:
                conn.execute(
                    "INSERT INTO ragmend_policy_meta VALUES (%s, 'feature_names', %s) ON CONFLICT DO NOTHING",
                    (self.namespace, json.dumps(names)),
                )
                # Another replica may have recorded a layout between our read and our insert.
                check_layout(self._layout(conn), names, f"{self!r}")
            state = self._arms(conn, len(names))
        unknown = [a for a in state if a not in arms]
        if unknown:
            raise ConfigError(
                f"policy state {self!r} holds action(s) {unknown} that this ragmend does not have "
                f"({', '.join(arms)})"
            )
        return with_arms(PolicyState(names, state), arms)

    def apply(self, arm: str, x: np.ndarray, reward: float, success: bool) -> ArmStats:
        x = np.asarray(x, dtype=np.float64)
        dim = len(x)
        params = {
            "ns": self.namespace,
            "arm": arm,
            "r": float(reward),
            "s": int(success),
            "f": int(not success),
            "xtx": np.outer(x, x).ravel().tolist(),
            "xty": (float(reward) * x).tolist(),
        }
        with self._db.use() as conn, conn.transaction():
            row = conn.execute(_UPSERT, params).fetchone()
        return _decode(row, dim)

    def export_state(self) -> PolicyState:
        # REPEATABLE READ: the layout and every arm from one snapshot.
        with self._db.use() as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            names = self._layout(conn) or ()
            arms = self._arms(conn, len(names)) if names else {}
        return PolicyState(names, arms)

    def import_state(self, state: PolicyState) -> None:
        with self._db.use() as conn, conn.transaction():
            self._clear(conn)
            conn.execute(
                "INSERT INTO ragmend_policy_meta VALUES (%s, 'feature_names', %s)",
                (self.namespace, json.dumps(state.feature_names)),
            )
            for arm, s in state.arms.items():
                conn.execute(
                    "INSERT INTO ragmend_policy_arms (namespace, arm, pulls, reward_sum, successes, "
                    "failures, xtx, xty) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                    (
                        self.namespace, arm, s.pulls, s.reward_sum, s.successes, s.failures,
                        np.asarray(s.xtx).ravel().tolist(), np.asarray(s.xty).tolist(),
                    ),
                )  # fmt: skip

    def reset(self) -> None:
        with self._db.use() as conn, conn.transaction():
            self._clear(conn)

    def _clear(self, conn: Any) -> None:
        conn.execute("DELETE FROM ragmend_policy_arms WHERE namespace = %s", (self.namespace,))
        conn.execute("DELETE FROM ragmend_policy_meta WHERE namespace = %s", (self.namespace,))

    def close(self) -> None:
        self._db.close()


def _decode(row: Sequence[Any], dim: int) -> ArmStats:
    pulls, reward_sum, successes, failures, xtx, xty = row
    if len(xtx) != dim * dim or len(xty) != dim:
        raise ConfigError(f"a stored arm has {len(xty)} context features, the layout {dim}")
    return ArmStats(
        pulls=int(pulls),
        reward_sum=float(reward_sum),
        successes=int(successes),
        failures=int(failures),
        xtx=frozen_array(np.asarray(xtx, dtype=np.float64).reshape(dim, dim), (dim, dim)),
        xty=frozen_array(np.asarray(xty, dtype=np.float64), (dim,)),
    )
