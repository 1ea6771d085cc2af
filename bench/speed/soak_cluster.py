"""The servers of `ragmend bench soak`: its replicas (`ragmend serve` processes on loopback), the
PostgreSQL they share (pgserver's, started here as tests/conftest.py starts it), and what the soak
reads of them: each process's RSS and open file descriptors, and the size of the policy state and
of the vote ledger where the servers keep them (SQLite files under data_dir, or PostgreSQL tables).

Each replica gets its own data_dir and configuration file in the soak's work directory, the
operator's configuration with the soak's own keys (one admin key, a few user keys): the soak
votes with the key that received each answer, as the feedback API requires.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from ragmend import pg
from ragmend.bench.speed.load import proc_status
from ragmend.bench.speed.startup import free_port
from ragmend.errors import InputError, RagmendError

SERVE = (sys.executable, "-m", "ragmend.cli")
USER_KEYS = 3  # several voters, so no key reaches its votes a minute or its share of the learning


class PostgresUnavailable(RagmendError):
    """The soak cannot start its PostgreSQL here (no pgserver wheel, or the server fails)."""

    exit_code = 3


@dataclass(frozen=True)
class Keys:
    admin: str
    users: tuple[str, ...]

    @staticmethod
    def new() -> Keys:
        return Keys(
            admin="soak-admin-" + secrets.token_hex(16),
            users=tuple(f"soak-user{i}-" + secrets.token_hex(16) for i in range(USER_KEYS)),
        )


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


class Postgres:
    """A pgserver PostgreSQL in the work directory, which the soak may restart (pg_ctl restart keeps
    its socket directory, so the DSN the replicas hold stays valid)."""

    def __init__(self, pgdata: Path):
        try:
            import pgserver
        except ImportError as e:
            raise PostgresUnavailable(
                f"replicas share a PostgreSQL the soak starts with the pgserver wheel, not installed ({e}); "
                "pip install pgserver, or --replicas 1 (the file backend)"
            ) from None
        try:
            self.server = pgserver.get_server(pgdata, cleanup_mode="stop")
        except Exception as e:  # whatever stops it from starting is the reason to refuse
            raise PostgresUnavailable(f"PostgreSQL cannot start here: {type(e).__name__}: {e}") from None
        self.pgdata = pgdata
        self.dsn = pg.create_database(self.server.get_uri(), "ragmend_soak", replace=True, migrated=True)

    def restart(self) -> None:
        from pgserver._commands import POSTGRES_BIN_PATH
        from pgserver.utils import PostmasterInfo

        # -m fast: sessions are cut off, as in a failover; -l keeps the server's log where it was.
        log = str(self.pgdata / "log")
        with tempfile.TemporaryFile() as out:  # a file, not a pipe: the server it starts keeps it open
            subprocess.run(
                [
                    str(POSTGRES_BIN_PATH / "pg_ctl"),
                    "-D",
                    str(self.pgdata),
                    "-w",
                    "-m",
                    "fast",
                    "-l",
                    log,
                    "restart",
                ],
                check=True,
                stdout=out,
                stderr=out,
                user=self.server.system_user,
                timeout=120,
            )
        # pgserver stops the postmaster it knows at cleanup: tell it the restarted one.
        self.server._postmaster_info = PostmasterInfo.read_from_pgdata(self.pgdata)

    def close(self) -> None:
        self.server.cleanup()


@dataclass
class Replica:
    name: str
    config_path: Path
    data_dir: Path
    log_path: Path
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0  # how many times this replica was started (a restart makes a new process)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None and self.proc.poll() is None else None

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [
                    *SERVE,
                    "--config",
                    str(self.config_path),
                    "serve",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                ],
                stdout=subprocess.DEVNULL,
                stderr=log,
                start_new_session=True,  # the soak's own signals (Ctrl-C) reach it only through stop()
            )
        self.starts += 1

    def wait_ready(self, timeout_s: float) -> float:
        """Seconds until /readyz is 200; RuntimeError when the process exits first or time runs out."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout_s:
            if self.proc is None or self.proc.poll() is not None:
                code = None if self.proc is None else self.proc.returncode
                raise RuntimeError(
                    f"replica {self.name} exited ({code}) before it was ready: see {self.log_path}"
                )
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.url + "/readyz", timeout=2).status_code == 200:
                    return time.monotonic() - t0
            time.sleep(0.2)
        raise RuntimeError(f"replica {self.name} not ready after {timeout_s:g} s: see {self.log_path}")

    def start_until_ready(self, timeout_s: float) -> float:
        """Start it and wait for it, starting it again while it exits early (its store may still be
        coming back): seconds to ready."""
        t0 = time.monotonic()
        while True:
            self.start()
            try:
                return self.wait_ready(max(1.0, timeout_s - (time.monotonic() - t0)))
            except RuntimeError:
                if time.monotonic() - t0 > timeout_s or (self.proc is not None and self.proc.poll() is None):
                    raise
                time.sleep(1.0)

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=60)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=90)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()

    def process(self) -> dict[str, Any]:
        """This replica's process now: pid, RSS in MiB and the anonymous part of it (the heap, where
        a leak grows; the rest is mapped files such as the models' weights, paged in as they are
        read), open file descriptors (None when down)."""
        pid = self.pid
        rss, anon = proc_status(pid, "VmRSS"), proc_status(pid, "RssAnon")
        try:
            fds = len(os.listdir(f"/proc/{pid}/fd")) if pid is not None else None
        except OSError:
            fds = None
        return {
            "pid": pid,
            "start": self.starts,
            "rss_mb": round(rss / 2**20, 1) if rss is not None else None,
            "anon_mb": round(anon / 2**20, 1) if anon is not None else None,
            "fds": fds,
        }


# The operator's settings that name one process's files: each replica keeps its own under its data_dir.
PER_PROCESS = {"policy": ("state_path",), "router": ("state_path",)}
SIZES = ("policy_rows", "policy_bytes", "ledger_rows", "ledger_votes", "ledger_bytes")
BROKEN = {"server": {"max_concurrency": 0}}  # fails validation (ge=1): the reload must refuse it


class Cluster:
    """The replicas and their store, from the operator's configuration `base`."""

    def __init__(
        self, base: dict[str, Any], workdir: Path, replicas: int, log: Callable[[str], None] = print
    ):
        if not 1 <= replicas <= 4:
            raise InputError("--replicas: 1 to 4")
        self.base = _without_per_process(base)
        self.workdir = workdir
        self.keys = Keys.new()
        self.log = log
        self.postgres: Postgres | None = None
        self.replicas = [
            Replica(
                name=chr(ord("a") + i),
                config_path=workdir / f"replica-{chr(ord('a') + i)}.yaml",
                data_dir=workdir / f"replica-{chr(ord('a') + i)}",
                log_path=workdir / f"replica-{chr(ord('a') + i)}.log",
            )
            for i in range(replicas)
        ]
        self.held: set[str] = set()  # replicas whose file a fault holds broken: no reload rewrites it

    @property
    def store(self) -> str:
        return "postgres" if self.postgres is not None else "files"

    def start(self, ready_timeout_s: float = 900.0) -> None:
        """PostgreSQL when more than one replica shares state, then each replica in turn: the first
        builds the index (in the shared store), the next ones start on it."""
        if len(self.replicas) > 1:
            self.log(f"starting PostgreSQL (pgserver) in {self.workdir / 'pgdata'}")
            self.postgres = Postgres(self.workdir / "pgdata")
        for r in self.replicas:
            self.write_config(r)
            r.start()
            self.log(f"replica {r.name} on {r.url}: ready after {r.wait_ready(ready_timeout_s):.1f} s")

    def config(self, replica: Replica) -> dict[str, Any]:
        server = {
            **self.base.get("server", {}),
            "admin_keys": [self.keys.admin],
            "api_keys": list(self.keys.users),
        }
        config = {**self.base, "data_dir": str(replica.data_dir), "server": server}
        if self.postgres is not None:
            config["store"] = {**self.base.get("store", {}), "kind": "postgres", "dsn": self.postgres.dsn}
        else:
            config["store"] = {"kind": "files"}
        return config

    def write_config(self, replica: Replica, broken: bool = False, comment: str = "") -> None:
        """The replica's configuration file, replaced atomically as an operator's tooling would;
        `broken`: with a value validation refuses; `comment`: a changed file with the same settings."""
        config = self.config(replica)
        if broken:
            config = {**config, "server": {**config["server"], **BROKEN["server"]}}
        text = (f"# {comment}\n" if comment else "") + yaml.safe_dump(config)
        tmp = replica.config_path.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(replica.config_path)

    def close(self) -> None:
        for r in self.replicas:
            r.stop()
        if self.postgres is not None:
            self.postgres.close()

    # -- what the soak reads of the stores ---------------------------------------------------------

    def state_sizes(self) -> dict[str, int | None]:
        """Rows and bytes of the policy state (the repair policy's and the router's arms) and of the
        vote ledger (answers remembered, votes among them); None where unreadable right now."""
        try:
            if self.postgres is not None:
                return _pg_sizes(self.postgres.dsn)
            return _file_sizes(self.replicas[0].data_dir)
        except (RagmendError, sqlite3.Error, OSError):
            return dict.fromkeys(SIZES)

    def ledger_votes(self, response_ids: list[str]) -> dict[str, float]:
        """The score the ledger holds for each of `response_ids` that has a vote."""
        if not response_ids:
            return {}
        if self.postgres is not None:
            conn = pg.connect(self.postgres.dsn)
            try:
                rows = conn.execute(
                    "SELECT response_id, score FROM ragmend_feedback "
                    "WHERE response_id = ANY(%s) AND score IS NOT NULL",
                    (response_ids,),
                ).fetchall()
            finally:
                conn.close()
            return {str(r[0]): float(r[1]) for r in rows}
        found: dict[str, float] = {}
        db = _sqlite_ro(self.replicas[0].data_dir / "feedback.sqlite")
        try:
            for start in range(0, len(response_ids), 500):
                chunk = response_ids[start : start + 500]
                marks = ",".join("?" * len(chunk))
                for rid, score in db.execute(
                    "SELECT response_id, score FROM served "
                    f"WHERE score IS NOT NULL AND response_id IN ({marks})",
                    chunk,
                ):
                    found[str(rid)] = float(score)
        finally:
            db.close()
        return found

    def stored_policy(self) -> dict[str, int] | None:
        """The repair policy's pulls per arm as its store holds them (the shared table, or the one
        replica's SQLite file); None where it cannot be read."""
        try:
            if self.postgres is not None:
                conn = pg.connect(self.postgres.dsn)
                try:
                    rows = conn.execute(
                        "SELECT arm, pulls FROM ragmend_policy_arms WHERE namespace = 'default'"
                    ).fetchall()
                finally:
                    conn.close()
            else:
                db = _sqlite_ro(self.replicas[0].data_dir / "policy.sqlite")
                try:
                    rows = db.execute("SELECT arm, pulls FROM arms").fetchall()
                finally:
                    db.close()
        except (RagmendError, sqlite3.Error, OSError):
            return None
        return {str(arm): int(pulls) for arm, pulls in rows}


def _without_per_process(base: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for section, keys in PER_PROCESS.items():
        if isinstance(out.get(section), dict):
            out[section] = {k: v for k, v in out[section].items() if k not in keys}
    out.pop("data_dir", None)
    return out


def _sqlite_ro(path: Path) -> sqlite3.Connection:
    if not path.exists():
        raise OSError(f"{path} does not exist yet")
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)


def _bytes(*paths: Path) -> int:
    return sum(p.stat().st_size for p in paths if p.exists())


def _file_sizes(data_dir: Path) -> dict[str, int | None]:
    def count(path: Path, sql: str) -> int | None:
        try:
            db = _sqlite_ro(path)
        except OSError:
            return None
        try:
            return int(db.execute(sql).fetchone()[0])
        except sqlite3.Error:
            return None
        finally:
            db.close()

    policy, router, ledger = (data_dir / f for f in ("policy.sqlite", "router.sqlite", "feedback.sqlite"))
    arms = [count(p, "SELECT count(*) FROM arms") for p in (policy, router)]
    wal = [p.with_name(p.name + "-wal") for p in (policy, router, ledger)]
    return {
        "policy_rows": sum(a for a in arms if a is not None) if any(a is not None for a in arms) else None,
        "policy_bytes": _bytes(policy, router, wal[0], wal[1]),
        "ledger_rows": count(ledger, "SELECT count(*) FROM served"),
        "ledger_votes": count(ledger, "SELECT count(*) FROM served WHERE score IS NOT NULL"),
        "ledger_bytes": _bytes(ledger, wal[2]),
    }


def _pg_sizes(dsn: str) -> dict[str, int | None]:
    conn = pg.connect(dsn, timeout_s=5)
    try:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM ragmend_policy_arms), "
            "pg_total_relation_size('ragmend_policy_arms') + pg_total_relation_size('ragmend_policy_meta'), "
            "(SELECT count(*) FROM ragmend_feedback), "
            "(SELECT count(*) FROM ragmend_feedback WHERE score IS NOT NULL), "
            "pg_total_relation_size('ragmend_feedback')"
        ).fetchone()
    except Exception as e:  # psycopg's errors while the database restarts: unreadable this time
        raise OSError(str(e)) from None
    finally:
        conn.close()
    return dict(zip(SIZES, (int(v) for v in row), strict=True)) if row else dict.fromkeys(SIZES)
