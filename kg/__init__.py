"""The corpus knowledge graph (issue 4).

Belongs here: relational triple extraction (spaCy dependency parse by default, REBEL where a
hub is reachable) behind one interface, the incremental KG built during ingest and persisted
beside the index, and the alignment of an answer's triples against it (kappa in consistent,
conflict, missing, no_triplet, with the matched triples as the explanation).
"""
