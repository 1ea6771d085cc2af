"""Evidence Graph Consistency features (the EGC paper, Section III; docs/references.md).

Nodes: the question q, the evidence passages E, the response's claims C, each a normalised
all-MiniLM-L6-v2 embedding. Edges where cosine similarity >= tau (0.4, the paper's operating
point): Q-E, E-C and E-E. Features: coverage (claims with an evidence edge), support density
(mean share of evidence per claim), agreement (mean weight of E-E edges), connectivity (claims
reachable from q) and isolation (claims with no edge; 1 - coverage by construction).
"""

from __future__ import annotations

import numpy as np

from ragmend.diagnosis.types import EGCFeatures


def egc_features(q: np.ndarray, evidence: np.ndarray, claims: np.ndarray, tau: float = 0.4) -> EGCFeatures:
    """q: (d,), evidence: (n, d), claims: (m, d); rows L2-normalised."""
    n, m = len(evidence), len(claims)
    if n == 0 or m == 0:
        # No evidence or nothing claimed: no claim can be grounded.
        return EGCFeatures(
            coverage=0.0,
            support_density=0.0,
            agreement=0.0,
            connectivity=0.0,
            isolation=1.0 if m else 0.0,
            score=-1 / 3 if m else 0.0,
        )
    ec = (evidence @ claims.T) >= tau  # (n, m)
    ee_sim = evidence @ evidence.T
    ee = (ee_sim >= tau) & ~np.eye(n, dtype=bool)
    qe = (evidence @ q) >= tau  # (n,)
    degree = ec.sum(axis=0)
    coverage = float((degree > 0).mean())
    support = float((degree / n).mean())
    agreement = float(ee_sim[ee].mean()) if ee.any() else 0.0
    # Reachability from q: through Q-E edges, then E-E edges (transitively), then E-C edges.
    reached = qe.copy()
    frontier = qe.copy()
    while frontier.any():
        nxt = ee[frontier].any(axis=0) & ~reached
        reached |= nxt
        frontier = nxt
    connectivity = float(ec[reached].any(axis=0).mean()) if reached.any() else 0.0
    isolation = float((degree == 0).mean())
    score = (coverage + support + connectivity - isolation) / 3
    return EGCFeatures(
        coverage=round(coverage, 4),
        support_density=round(support, 4),
        agreement=round(agreement, 4),
        connectivity=round(connectivity, 4),
        isolation=round(isolation, 4),
        score=round(score, 4),
    )
