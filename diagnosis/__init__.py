"""Failure diagnosis of every answer: D2R-RAG Algorithm 1 (docs/references.md) and its extensions.

Belongs here: NLI signals e_q (evidence vs query) and e_r (evidence vs response) aggregated
from passage-level probabilities by an explicit, configured rule; the failure type (WP, IE,
WR, LEM, NoFailure) from those signals and the knowledge-graph alignment kappa (kg/); the EGC
features, the evidence-conflict flag and the RAGEC stage attribution; one Diagnosis value.
"""
