"""Where created collections are recorded, beside the rest of the shared state: a JSON file under
data_dir (files; replaced atomically under a lock) or PostgreSQL's `ragmend_collections` (every
replica reads it). Declared collections live in the configuration, not here."""

from __future__ import annotations

import contextlib
import fcntl
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, cast

from ragmend import pg
from ragmend.errors import Conflict, IndexMissing
from ragmend.fileio import atomic_write_json
from ragmend.settings import Settings

REGISTRY_VERSION = 1


@dataclass(frozen=True)
class CollectionSpec:
    name: str
    sources: tuple[Path, ...] = ()
    policy: Literal["shared", "own"] = "shared"
    declared: bool = False  # in the configuration: changed there, not over the admin API

    def to_json(self) -> dict[str, Any]:
        return {"sources": [str(p) for p in self.sources], "policy": self.policy}

    @classmethod
    def from_json(cls, name: str, data: dict[str, Any]) -> CollectionSpec:
        policy = cast(Literal["shared", "own"], data.get("policy", "shared"))
        return cls(name, tuple(Path(p) for p in data.get("sources", ())), policy)


class CollectionRegistry(Protocol):
    def list(self) -> dict[str, CollectionSpec]: ...
    def add(self, spec: CollectionSpec) -> None: ...  # Conflict when the name is taken
    def remove(self, name: str) -> bool: ...  # whether it was there
    def close(self) -> None: ...


def open_registry(settings: Settings) -> CollectionRegistry:
    if settings.store.kind == "postgres":
        assert settings.store.dsn is not None  # StoreSettings requires it for postgres
        return PgRegistry(settings.store.dsn.get_secret_value(), settings.store.connect_timeout_s)
    return FileRegistry(settings.data_dir / "collections.json")


class FileRegistry:
    def __init__(self, path: Path):
        self.path = path

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, Any]]:
        """The registry's collections, to change in place; written back (atomically) on exit."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one read-modify-write at a time, across processes
            data = self._read()
            before = json.dumps(data, sort_keys=True)
            yield data
            if json.dumps(data, sort_keys=True) != before:
                atomic_write_json(self.path, {"version": REGISTRY_VERSION, "collections": data})

    def _read(self) -> dict[str, Any]:
        try:
            doc = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as e:
            raise IndexMissing(f"the collections registry {self.path} cannot be read: {e}") from None
        if doc.get("version") != REGISTRY_VERSION:
            raise IndexMissing(f"the collections registry {self.path} has version {doc.get('version')}")
        return dict(doc["collections"])

    def list(self) -> dict[str, CollectionSpec]:
        return {name: CollectionSpec.from_json(name, d) for name, d in self._read().items()}

    def add(self, spec: CollectionSpec) -> None:
        with self._locked() as data:
            if spec.name in data:
                raise Conflict(f"collection '{spec.name}' exists")
            data[spec.name] = spec.to_json()

    def remove(self, name: str) -> bool:
        with self._locked() as data:
            return data.pop(name, None) is not None

    def close(self) -> None:
        """Nothing held between calls."""


class PgRegistry:
    def __init__(self, dsn: str, timeout_s: float):
        self.dsn = dsn
        self.timeout_s = timeout_s
        self._db = pg.ProcessConnection(dsn, timeout_s)

    def list(self) -> dict[str, CollectionSpec]:
        with self._db.use() as conn:
            rows = conn.execute("SELECT name, spec FROM ragmend_collections ORDER BY name").fetchall()
        return {name: CollectionSpec.from_json(name, spec) for name, spec in rows}

    def add(self, spec: CollectionSpec) -> None:
        with self._db.use() as conn:
            row = conn.execute(
                "INSERT INTO ragmend_collections (name, spec) VALUES (%s, %s) "
                "ON CONFLICT (name) DO NOTHING RETURNING name",
                (spec.name, json.dumps(spec.to_json())),
            ).fetchone()
        if row is None:
            raise Conflict(f"collection '{spec.name}' exists")

    def remove(self, name: str) -> bool:
        with self._db.use() as conn:
            row = conn.execute("DELETE FROM ragmend_collections WHERE name = %s RETURNING name", (name,))
            return row.fetchone() is not None

    def close(self) -> None:
        self._db.close()
