"""An on-disk cache of generator calls, keyed by model, messages and sampling parameters.

For evaluation runs: a rerun is cheap and an interrupted run resumes where it stopped.
SQLite in WAL mode, one row per call, each insert its own transaction: a crash loses at most the
call in flight. Off in the server by default (models.generator.cache); a cached Generation keeps
the seconds it took when it was made, flagged `cached`, so latency reports stay honest.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from ragmend.models.generation import Generation


def cache_key(model: str, messages: list[dict[str, str]], params: dict[str, Any]) -> str:
    blob = json.dumps({"model": model, "messages": messages, "params": params}, sort_keys=True)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class GenerationCache:
    def __init__(self, path: Path):
        self.path = Path(path).expanduser()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._con = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._con.execute("PRAGMA journal_mode=WAL")
        self._con.execute(
            "CREATE TABLE IF NOT EXISTS generations (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
        )
        self._lock = threading.Lock()

    def get(self, key: str) -> Generation | None:
        with self._lock:
            row = self._con.execute("SELECT value FROM generations WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        fields = json.loads(row[0])
        if fields.get("token_logprobs") is not None:
            fields["token_logprobs"] = tuple(fields["token_logprobs"])
        return replace(Generation(**fields), cached=True)

    def put(self, key: str, gen: Generation) -> None:
        value = json.dumps(asdict(replace(gen, cached=False)))
        with self._lock:
            self._con.execute("INSERT OR REPLACE INTO generations (key, value) VALUES (?, ?)", (key, value))

    def __len__(self) -> int:
        with self._lock:
            return int(self._con.execute("SELECT COUNT(*) FROM generations").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._con.close()
