"""Collections: several corpora served by one server, each with its own index, graph and
(optionally) policy, chosen per request by the model name `<server.model_name>/<collection>`.

A collection is declared in the configuration (`collections:`) or created over the admin API;
created ones are recorded where the shared state lives (engine/collection_registry.py: a JSON
file under data_dir, or PostgreSQL's `ragmend_collections`), so every replica serves them. Each
collection is an Engine of its own over the default engine's loaded models: its index, graph and
own policy live under `<data_dir>/collections/<name>/` (files) or under its name as namespace
(PostgreSQL); a collection with `policy: shared` teaches the default engine's policy object.
A collection created on another replica is opened on its first request here; one deleted there
is dropped here when the registry is read again (at most `store.max_staleness_s` later); a request
for it before then is a 404 (Engine.answer finds its index generations gone).
"""

from __future__ import annotations

import logging
import re
import shutil
import threading
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass

from ragmend import clock
from ragmend.engine.collection_registry import CollectionSpec, open_registry
from ragmend.engine.corpus import DEFAULT_NAMESPACE
from ragmend.engine.engine import Engine
from ragmend.errors import Conflict, InputError, NotFound
from ragmend.rag.documents import SourceDocument
from ragmend.rag.ingest import IngestReport
from ragmend.settings import COLLECTION_NAME, Settings, settings_with

log = logging.getLogger("ragmend.collections")


def check_name(name: str) -> str:
    if not re.fullmatch(COLLECTION_NAME, name) or name == DEFAULT_NAMESPACE:
        raise InputError(
            f"collection name {name!r}: 1-40 lower-case letters, digits or _, starting with a letter, "
            f"and not '{DEFAULT_NAMESPACE}'"
        )
    return name


def collection_settings(base: Settings, spec: CollectionSpec) -> Settings:
    """The default settings with the collection's own data directory, sources and policy file."""
    data_dir = base.data_dir / "collections" / spec.name
    policy = {"state_path": str(data_dir / "policy.sqlite")} if spec.policy == "own" else {}
    return settings_with(base, data_dir=str(data_dir), sources=[str(p) for p in spec.sources], policy=policy)


@dataclass(frozen=True)
class CollectionInfo:
    """What GET /admin/collections shows of one collection."""

    name: str
    spec: CollectionSpec
    documents: int
    generation: str | None


class Collections:
    def __init__(self, default: Engine):
        self.default = default
        self._registry = open_registry(default.settings)
        self._lock = threading.RLock()
        self._engines: dict[str, Engine] = {}
        self._opening: dict[str, threading.Lock] = {}  # one opening at a time per collection
        self._created: dict[str, CollectionSpec] = {}
        self._read_at = float("-inf")
        self._unfollow = default.on_tunables(self._follow)

    # -- which collections there are -------------------------------------------------------------

    def specs(self, fresh: bool = False) -> dict[str, CollectionSpec]:
        """Every collection but the default: declared, then created (re-read when older than
        store.max_staleness_s, or when `fresh`)."""
        settings = self.default.settings
        with self._lock:
            now = clock.now()
            if fresh or now - self._read_at > settings.store.max_staleness_s:
                self._created = self._registry.list()
                self._read_at = now
                for gone in set(self._engines) - set(self._created) - set(settings.collections):
                    log.info("collection %s was deleted (by another replica): closing it", gone)
                    self._close(gone)
            declared = {
                name: CollectionSpec(name, c.sources, c.policy, declared=True)
                for name, c in settings.collections.items()
            }
            return {**declared, **{k: v for k, v in self._created.items() if k not in declared}}

    def names(self) -> list[str]:
        return sorted(self.specs())

    def get(self, name: str | None) -> Engine:
        """The engine serving `name` (None or "default": the default corpus); opened on first use.
        Opening one collection (a declared one may build its index) holds up only requests for
        that collection, not the others."""
        if name is None or name == DEFAULT_NAMESPACE:
            return self.default
        spec = self.specs().get(name) or self.specs(fresh=True).get(name)  # fresh: created elsewhere
        if spec is None:
            raise NotFound(f"no collection '{name}' (GET /admin/collections lists them)")
        with self._lock:
            engine = self._engines.get(name)
            gate = self._opening.setdefault(name, threading.Lock())
        if engine is not None:
            return engine
        with gate:
            with self._lock:
                engine = self._engines.get(name)
            if engine is None:
                engine = self._open(spec)
                # A collection another replica created is opened, not built: its ingest is theirs.
                engine.load(build_index=spec.declared, roles=())
                with self._lock:
                    self._engines[name] = engine
            return engine

    def open(self, name: str) -> Engine:
        """A new, unloaded engine of the named collection (the CLI's: `ragmend ingest --collection`)."""
        spec = self.specs(fresh=True).get(name)
        if spec is None:
            raise NotFound(
                f"no collection '{name}' (declare it under collections:, or POST /admin/collections)"
            )
        return self._open(spec)

    def _open(self, spec: CollectionSpec) -> Engine:
        settings = collection_settings(self.default.settings, spec)
        shared = spec.policy == "shared"
        return Engine(
            settings,
            self.default.models,
            namespace=spec.name,
            policy=self.default.policy if shared else None,
            router=self.default.router if shared else None,
        )

    def load_declared(self) -> None:
        """Open (and build from their sources, where they have no index) the declared collections."""
        for name in self.default.settings.collections:
            self.get(name)

    # -- admin -----------------------------------------------------------------------------------

    def create(self, spec: CollectionSpec) -> CollectionInfo:
        """Record a new collection and build its index from its sources (when it has some). A
        build that fails removes the record and what was written: nothing half made stays."""
        check_name(spec.name)
        for path in spec.sources:
            try:
                found = path.exists()
            except (OSError, ValueError) as e:  # a name too long, a NUL byte
                raise InputError(f"sources: {str(path)[:200]!r} is not a usable path: {e}") from None
            if not found:
                raise InputError(f"sources: {path} does not exist on this server")
        with self._lock:
            if spec.name in self.specs(fresh=True):
                raise Conflict(f"collection '{spec.name}' exists")
            self._registry.add(spec)  # Conflict when another replica created it meanwhile
            self._read_at = float("-inf")
        try:
            engine = self._open(spec)
            engine.load(build_index=True, roles=())
        except BaseException:
            self._registry.remove(spec.name)
            self._drop_data(spec)
            raise
        with self._lock:
            self._engines[spec.name] = engine
        log.info("collection %s created (%d source(s))", spec.name, len(spec.sources))
        return self.info(spec.name)

    def delete(self, name: str) -> None:
        """Forget a created collection: its record, then its index, graph and own policy."""
        spec = self.specs(fresh=True).get(check_name(name))
        if spec is None:
            raise NotFound(f"no collection '{name}'")
        if spec.declared:
            raise Conflict(f"collection '{name}' is declared in the configuration: remove it there")
        if not self._registry.remove(name):
            raise NotFound(f"no collection '{name}' (deleted meanwhile)")
        with self._lock:
            self._read_at = float("-inf")
            engine = self._engines.pop(name, None)
        if engine is not None:
            engine.close()
        self._drop_data(spec)
        log.info("collection %s deleted", name)

    def _drop_data(self, spec: CollectionSpec) -> None:
        """Delete a collection's index, graph and own policy state, wherever they are."""
        engine = self._open(spec)
        try:
            engine.corpus.store.delete_namespace()
            if engine.corpus.kg is not None:
                engine.corpus.kg.store.db.delete_namespace()
            if spec.policy == "own":
                engine.policy.reset()
        finally:
            engine.close()
        if engine.settings.store.kind == "files":  # the policy file and the directories too
            shutil.rmtree(engine.settings.data_dir, ignore_errors=True)

    def upsert_documents(
        self, name: str, docs: Sequence[SourceDocument], delete: Collection[str] = ()
    ) -> IngestReport:
        return self.get(name).corpus.upsert_documents(docs, delete)

    def info(self, name: str) -> CollectionInfo:
        engine = self.get(name)
        spec = (
            CollectionSpec(DEFAULT_NAMESPACE, engine.corpus.sources, "own", declared=True)
            if name == DEFAULT_NAMESPACE
            else self.specs()[name]
        )
        current = engine.corpus.store.current_generation()
        return CollectionInfo(name, spec, len(engine.corpus.documents()), current)

    def __iter__(self) -> Iterator[str]:
        return iter([DEFAULT_NAMESPACE, *self.names()])

    # -- life cycle ------------------------------------------------------------------------------

    def _follow(self, settings: Settings, live: Collection[str]) -> None:
        """A change of the default engine's tunable settings reaches every open collection."""
        with self._lock:
            engines = list(self._engines.items())
        specs = self.specs()
        for name, engine in engines:
            if name in specs:
                engine.apply_tunables(collection_settings(settings, specs[name]), live)

    def _close(self, name: str) -> None:
        engine = self._engines.pop(name, None)
        if engine is not None:
            engine.close()

    def close(self) -> None:
        self._unfollow()
        with self._lock:
            for name in list(self._engines):
                self._close(name)
        self._registry.close()
