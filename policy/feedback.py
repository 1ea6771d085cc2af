"""Users' votes on answers, as delayed rewards for the repair decision that produced them.

Every answer the server sends is remembered by its response id (`Served`): which arm decided it,
in which context x, and the cost factors its repair earned. A vote (`POST /v1/feedback`: a score
in [0, 1], or thumbs up / down = 1 / 0) on a remembered answer becomes ONE more observation of
that arm in that context:

    r_feedback = score * latency_factor * memory_factor      (the factors the repair measured)

added to the policy's sums like every update (persisted, shared by replicas on PostgreSQL). The
diagnosis's reward was already learned when the answer was sent; the vote is a second, human
judgement of the same decision, so an arm that the diagnosis liked but users vote down drifts
down, and the other way round. An answer sent without a repair decision (no failure, repair off,
or skipped) is remembered too and its vote recorded, but there is no arm to credit.

One vote per answer: the same vote again is acknowledged and changes nothing (idempotent); another
vote on an answer already voted on is refused (Conflict, 409), as is an unknown id (NotFound,
404) and one past `policy.feedback_ttl_s` (Gone, 410). The vote is written before the policy is
updated, so a crash between the two loses the update rather than counting it twice.

The learned state is every user's, so a vote is tied to whoever received the answer: the answer
keeps its receiver (a key's fingerprint, never the key: server/auth.py `Caller`), and a vote from
anyone else is refused (Forbidden, 403). A vote is recorded but kept out of the learning
(`Vote.withheld` says why) when the answer's request set its own generation options
(`Served.learn`), when nothing decided the answer, or when its voter already holds its share of
the latest learned votes (`ShareCap`, decided in the vote's transaction, so replicas agree). A
client's message id stays bound to the first answer shown under it: a later request naming the
same id cannot take its ratings.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from ragmend.errors import Conflict, Forbidden, Gone, NotFound
from ragmend.settings import Settings


@dataclass(frozen=True, kw_only=True)
class Served:
    """What an answer's vote would credit: the deciding arm, its context and its cost factors."""

    response_id: str
    namespace: str  # the corpus that answered: "default", or a collection's name
    arm: str | None  # the repair decision behind the answer; None: no decision was made
    context: tuple[float, ...] | None
    cost_factor: float  # the repair's latency_factor * memory_factor (1.0 without a repair)
    created: float  # unix seconds
    # The router's plan when the reply is its first pass's own answer (no repair replaced it),
    # its context and the pass's cost factors; None: no routed answer to credit.
    plan: str | None = None
    plan_context: tuple[float, ...] | None = None
    plan_cost_factor: float = 1.0
    # The chat client's own id of the message that showed the answer (server.message_id_header):
    # a rating a client stores under its message id reaches the answer through it.
    message_id: str | None = None
    # Who received the answer (server/auth.py Caller.identity): a vote counts only from them.
    receiver: str | None = None
    # False: the request set its own generation options, so its answer teaches nothing, nor its vote.
    learn: bool = True


@dataclass(frozen=True)
class ShareCap:
    """How much of the learning one voter may hold: of the latest `window` learned votes (within
    policy.feedback_ttl_s), at most `max_share`, while another voter has votes among them (a lone
    voter crowds out no one: a server whose users share one key learns from every vote)."""

    window: int = 100
    max_share: float = 1.0

    def reached(self, latest: Sequence[str], voter: str) -> bool:
        """Whether one more learned vote of `voter` would pass the cap, given the voters of the
        latest learned votes, newest first (the oldest leaves a full window as this one enters)."""
        kept = latest[: self.window - 1]
        mine = sum(1 for v in kept if v == voter) + 1
        return len(kept) + 1 > mine and mine > self.max_share * self.window


# Why a recorded vote teaches nothing: the same vote was already recorded; the answer's request
# set its own generation options; no repair decision or routed pass made the answer; its voter
# holds its share of the latest learned votes.
Withheld = Literal["already_recorded", "request_options", "nothing_to_credit", "key_share"]


@dataclass(frozen=True)
class Vote:
    served: Served
    score: float
    new: bool  # False: the same vote was already recorded (nothing changed)
    withheld: Withheld | None = None  # None: the vote may be learned (Engine.credit)

    @property
    def reward(self) -> float | None:
        """The delayed reward for the arm; None when no arm decided the answer."""
        return None if self.served.arm is None else self.score * self.served.cost_factor

    @property
    def plan_reward(self) -> float | None:
        """The delayed reward for the router's plan; None when the reply is not its pass's answer."""
        return None if self.served.plan is None else self.score * self.served.plan_cost_factor


class FeedbackLedger(Protocol):
    def remember(self, served: Served) -> None:
        """Keep an answer; its message id only when no answer holds it yet (the first keeps it)."""
        ...

    def vote(
        self, response_id: str, score: float, comment: str | None, ttl_s: float, *, voter: str, cap: ShareCap
    ) -> Vote:
        """Record one vote of `voter` atomically (NotFound / Gone / Forbidden / Conflict as above),
        and whether it may be learned under `cap`."""
        ...

    def response_for(self, message_id: str) -> str:
        """The response id of the first answer a client showed as `message_id` (NotFound)."""
        ...

    def close(self) -> None: ...


def _checked(
    row: dict[str, Any] | None, response_id: str, score: float, ttl_s: float, now: float, voter: str
) -> Served:
    """The remembered answer `voter` may vote on, or the error that refuses the vote."""
    if row is None:
        raise NotFound(f"no answer with id {response_id!r} is known to this server (or its feedback store)")
    if now - row["created"] > ttl_s:
        raise Gone(
            f"answer {response_id!r} was sent {(now - row['created']) / 3600:.1f} h ago; votes are kept "
            f"for {ttl_s / 3600:g} h (policy.feedback_ttl_s)"
        )
    if row.get("receiver") is None:
        raise Forbidden(f"answer {response_id!r} was sent before votes were tied to the key that received it")
    if row["receiver"] != voter:
        raise Forbidden(
            f"answer {response_id!r} was sent to another key: only the key that received it may vote"
        )
    served = Served(
        response_id=response_id,
        namespace=row["namespace"],
        arm=row["arm"],
        context=_vector(row["context"]),
        cost_factor=row["cost_factor"],
        created=row["created"],
        plan=row.get("plan"),
        plan_context=_vector(row.get("plan_context")),
        plan_cost_factor=1.0 if row.get("plan_cost_factor") is None else float(row["plan_cost_factor"]),
        receiver=row["receiver"],
        learn=row.get("learn") is None or bool(row["learn"]),
    )
    if row["score"] is not None and row["score"] != score:
        raise Conflict(f"answer {response_id!r} already has a vote ({row['score']:g}); one vote per answer")
    return served


def _withheld(served: Served, new: bool, capped: Callable[[], bool]) -> Withheld | None:
    """Why a recorded vote is kept out of the learning (module docstring); None: it is not.
    `capped` reads the voter's share only where it decides."""
    if not new:
        return "already_recorded"
    if not served.learn:
        return "request_options"
    if served.arm is None and served.plan is None:
        return "nothing_to_credit"
    return "key_share" if capped() else None


def _vector(text: str | None) -> tuple[float, ...] | None:
    return None if text is None else tuple(json.loads(text))


def _row(served: Served) -> tuple[Any, ...]:
    def text(v: tuple[float, ...] | None) -> str | None:
        return None if v is None else json.dumps(list(v))

    return (
        served.response_id,
        served.namespace,
        served.arm,
        text(served.context),
        served.cost_factor,
        served.created,
        served.plan,
        text(served.plan_context),
        served.plan_cost_factor,
        served.message_id,
        served.receiver,
        served.learn,
    )


_COLUMNS = (
    "response_id, namespace, arm, context, cost_factor, created, plan, plan_context, plan_cost_factor, "
    "message_id, receiver, learn"
)


def _unknown_message(message_id: str) -> NotFound:
    return NotFound(
        f"no answer shown as message {message_id!r} is known to this server (or its feedback store): "
        "the client's message id reaches ragmend in the header server.message_id_header"
    )


# Serialises the share decisions of votes across replicas (pg_advisory_xact_lock): two votes of
# one key reaching two replicas at once must not both pass the cap.
SHARE_LOCK = 0x7261676D766F7465


def _insert_params(served: Served) -> tuple[Any, ...]:
    """The insert's parameters: the message id twice, once to test whether an answer holds it."""
    row = _row(served)
    return (*row[:9], row[9], row[9], *row[10:])


class SQLiteLedger:
    """The ledger of one host: a SQLite file beside the policy state (WAL, one connection)."""

    _SCHEMA = """CREATE TABLE IF NOT EXISTS served (
        response_id TEXT PRIMARY KEY, namespace TEXT NOT NULL, arm TEXT, context TEXT,
        cost_factor REAL NOT NULL, created REAL NOT NULL, score REAL, comment TEXT, voted REAL,
        plan TEXT, plan_context TEXT, plan_cost_factor REAL, message_id TEXT, receiver TEXT,
        learn INTEGER, credited INTEGER)"""
    # Columns a ledger written before them lacks, added on open.
    _ADDED = (
        ("plan", "TEXT"),
        ("plan_context", "TEXT"),
        ("plan_cost_factor", "REAL"),
        ("message_id", "TEXT"),
        ("receiver", "TEXT"),
        ("learn", "INTEGER"),
        ("credited", "INTEGER"),
    )
    _PRUNE_EVERY = 256  # remembered answers between two deletions of the expired ones

    def __init__(self, path: Path | str, ttl_s: float):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.ttl_s = ttl_s
        self._db = sqlite3.connect(
            str(self.path), timeout=30.0, check_same_thread=False, isolation_level=None
        )
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        # Every answer is remembered on the request's path: no fsync for that (WAL, NORMAL: safe
        # against a crash of the process; a power cut may forget the last answers, whose votes
        # are then refused as unknown). A vote is made durable before it is learned (`vote`).
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(self._SCHEMA)
        have = {row["name"] for row in self._db.execute("PRAGMA table_info(served)")}
        for name, kind in self._ADDED:
            if name not in have:
                self._db.execute(f"ALTER TABLE served ADD COLUMN {name} {kind}")
        self._db.execute("CREATE INDEX IF NOT EXISTS served_by_message ON served (message_id)")
        self._db.execute("CREATE INDEX IF NOT EXISTS served_by_credit ON served (credited, voted)")
        self._lock = threading.Lock()
        self._since_prune = 0

    def remember(self, served: Served) -> None:
        with self._lock:
            self._db.execute(
                f"INSERT OR IGNORE INTO served ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, "
                "CASE WHEN EXISTS (SELECT 1 FROM served WHERE message_id = ?) THEN NULL ELSE ? END, ?, ?)",
                _insert_params(served),
            )
            self._since_prune += 1
            if self._since_prune >= self._PRUNE_EVERY:
                self._since_prune = 0
                self._db.execute("DELETE FROM served WHERE created < ?", (time.time() - self.ttl_s,))

    def vote(
        self, response_id: str, score: float, comment: str | None, ttl_s: float, *, voter: str, cap: ShareCap
    ) -> Vote:
        def capped() -> bool:
            latest = self._db.execute(
                "SELECT receiver FROM served WHERE credited = 1 AND voted >= ? "
                "ORDER BY voted DESC, rowid DESC LIMIT ?",
                (time.time() - ttl_s, cap.window),
            )
            return cap.reached([r["receiver"] for r in latest], voter)

        with self._lock:
            self._db.execute("PRAGMA synchronous=FULL")  # this commit is fsynced: one vote, counted once
            self._db.execute("BEGIN IMMEDIATE")
            try:
                cur = self._db.execute("SELECT * FROM served WHERE response_id = ?", (response_id,))
                found = cur.fetchone()
                row = None if found is None else dict(found)
                served = _checked(row, response_id, score=score, ttl_s=ttl_s, now=time.time(), voter=voter)
                assert row is not None
                new = row["score"] is None
                withheld = _withheld(served, new, capped)
                if new:
                    self._db.execute(
                        "UPDATE served SET score = ?, comment = ?, voted = ?, credited = ? "
                        "WHERE response_id = ?",
                        (score, comment, time.time(), withheld is None, response_id),
                    )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            finally:
                self._db.execute("PRAGMA synchronous=NORMAL")
        return Vote(served, score, new, withheld)

    def response_for(self, message_id: str) -> str:
        with self._lock:
            row = self._db.execute(
                "SELECT response_id FROM served WHERE message_id = ? ORDER BY created, response_id LIMIT 1",
                (message_id,),
            ).fetchone()
        if row is None:
            raise _unknown_message(message_id)
        return str(row["response_id"])

    def close(self) -> None:
        with self._lock:
            self._db.close()


class PostgresLedger:
    """The ledger replicas share: table ragmend_feedback (`ragmend db migrate`); a vote takes the
    answer's row lock, so two replicas receiving votes for one answer record exactly one."""

    _KEYS = (
        "namespace",
        "arm",
        "context",
        "cost_factor",
        "created",
        "score",
        "plan",
        "plan_context",
        "plan_cost_factor",
        "receiver",
        "learn",
    )

    def __init__(self, dsn: str, timeout_s: float = 10.0):
        from ragmend import pg

        self._db = pg.ProcessConnection(dsn, timeout_s)

    def remember(self, served: Served) -> None:
        with self._db.use() as conn:
            conn.execute(
                f"INSERT INTO ragmend_feedback ({_COLUMNS}) "
                "VALUES (%s, %s, %s, %s, %s, to_timestamp(%s), %s, %s, %s, CASE WHEN EXISTS "
                "(SELECT 1 FROM ragmend_feedback WHERE message_id = %s::text) THEN NULL ELSE %s::text END, "
                "%s, %s) ON CONFLICT DO NOTHING",
                _insert_params(served),
            )

    def vote(
        self, response_id: str, score: float, comment: str | None, ttl_s: float, *, voter: str, cap: ShareCap
    ) -> Vote:
        with self._db.use() as conn, conn.transaction():

            def capped() -> bool:
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (SHARE_LOCK,))
                latest = conn.execute(
                    "SELECT receiver FROM ragmend_feedback WHERE credited "
                    "AND voted >= now() - make_interval(secs => %s) ORDER BY voted DESC LIMIT %s",
                    (ttl_s, cap.window),
                ).fetchall()
                return cap.reached([r[0] for r in latest], voter)

            found = conn.execute(
                "SELECT namespace, arm, context, cost_factor, extract(epoch FROM created), score, plan, "
                "plan_context, plan_cost_factor, receiver, learn FROM ragmend_feedback "
                "WHERE response_id = %s FOR UPDATE",
                (response_id,),
            ).fetchone()
            row = None if found is None else dict(zip(self._KEYS, found, strict=True))
            if row is not None:
                row["created"] = float(row["created"])
            served = _checked(row, response_id, score=score, ttl_s=ttl_s, now=time.time(), voter=voter)
            assert row is not None
            new = row["score"] is None
            withheld = _withheld(served, new, capped)
            if new:
                conn.execute(
                    "UPDATE ragmend_feedback SET score = %s, comment = %s, voted = now(), credited = %s "
                    "WHERE response_id = %s",
                    (score, comment, withheld is None, response_id),
                )
        return Vote(served, score, new, withheld)

    def response_for(self, message_id: str) -> str:
        with self._db.use() as conn:
            row = conn.execute(
                "SELECT response_id FROM ragmend_feedback WHERE message_id = %s "
                "ORDER BY created, response_id LIMIT 1",
                (message_id,),
            ).fetchone()
        if row is None:
            raise _unknown_message(message_id)
        return str(row[0])

    def close(self) -> None:
        self._db.close()


def open_ledger(settings: Settings) -> FeedbackLedger:
    """The ledger `store.kind` names: a SQLite file under data_dir, or PostgreSQL's table."""
    if settings.store.kind == "postgres":
        assert settings.store.dsn is not None  # StoreSettings requires it for postgres
        return PostgresLedger(settings.store.dsn.get_secret_value(), settings.store.connect_timeout_s)
    return SQLiteLedger(settings.data_dir / "feedback.sqlite", settings.policy.feedback_ttl_s)
