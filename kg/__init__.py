"""The corpus knowledge graph.

Relational triple extraction (spaCy dependency parse by default, REBEL where a hub is reachable)
behind one interface (kg.triples, kg.rebel; kg.factory picks one), the incremental graph built
during ingest (kg.store) and persisted in SQLite beside the index or in PostgreSQL shared by
replicas (kg.graphdb, kg.pggraph), and the alignment of an
answer's triples against it (kg.align: kappa in consistent, conflict, missing, no_triplet, with the
matched triples as the explanation). docs/kg.md describes the rules and their limits.
"""

from ragmend.kg.align import Alignment, AlignThresholds, Kappa, TripleAlignment, align, align_text
from ragmend.kg.factory import build_extractor, graph_path, open_store
from ragmend.kg.phrases import Embed, embed_with
from ragmend.kg.rebel import RebelTripleExtractor, parse_rebel
from ragmend.kg.store import KGSnapshot, KGStats, KGStore, KGTriple, SyncReport
from ragmend.kg.triples import SpacyTripleExtractor, Triple, TripleExtractor

__all__ = [
    "AlignThresholds",
    "Alignment",
    "Embed",
    "KGSnapshot",
    "KGStats",
    "KGStore",
    "KGTriple",
    "Kappa",
    "RebelTripleExtractor",
    "SpacyTripleExtractor",
    "SyncReport",
    "Triple",
    "TripleAlignment",
    "TripleExtractor",
    "align",
    "align_text",
    "build_extractor",
    "embed_with",
    "graph_path",
    "open_store",
    "parse_rebel",
]
