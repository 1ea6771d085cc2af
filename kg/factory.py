"""The configured pieces: the extractor kg.extractor names, and the graph where store.kind says."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ragmend.kg.graphdb import GraphDatabase, SqliteGraph
from ragmend.kg.phrases import embed_with
from ragmend.kg.store import KGStore
from ragmend.kg.triples import SpacyTripleExtractor, TripleExtractor
from ragmend.models.registry import ModelRegistry
from ragmend.settings import Settings


def build_extractor(settings: Settings, nlp: Any | None = None) -> TripleExtractor:
    """The extractor `settings.kg` names; `nlp` is an already loaded spaCy pipeline to reuse."""
    if settings.kg.extractor == "rebel":
        from ragmend.kg.rebel import RebelTripleExtractor

        return RebelTripleExtractor.from_settings(settings)
    if nlp is None:
        from ragmend.models.spacy_model import load_spacy

        nlp = load_spacy(settings.models)
    return SpacyTripleExtractor(nlp, max_triples_per_text=settings.kg.max_triples_per_chunk)


def graph_path(settings: Settings) -> Path:
    """Beside the index directory, outside its generations: the graph is synchronised, not rebuilt."""
    return settings.data_dir / "kg" / "graph.sqlite3"


def open_database(settings: Settings, namespace: str = "default") -> GraphDatabase:
    """The graph's tables where `store.kind` says: a SQLite file beside the index, or PostgreSQL."""
    if settings.store.kind == "postgres":
        from ragmend.kg.pggraph import PgGraph

        assert settings.store.dsn is not None  # StoreSettings requires it for postgres
        dsn = settings.store.dsn.get_secret_value()
        return PgGraph(dsn, namespace, timeout_s=settings.store.connect_timeout_s)
    return SqliteGraph(graph_path(settings))


def open_store(settings: Settings, models: ModelRegistry, namespace: str = "default") -> KGStore:
    """The corpus graph with the configured extractor and the embeddings role (loads both)."""
    nlp = models.spacy if settings.kg.extractor == "spacy" else None
    return KGStore(
        open_database(settings, namespace),
        build_extractor(settings, nlp),
        embed_with(models.embeddings),
        # Phrases embedded by another embeddings model are re-embedded at the next sync.
        embed_name=settings.models.embeddings.model,
    )
