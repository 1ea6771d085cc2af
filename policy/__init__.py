"""Repair policies (issue 5): contextual bandits that pick ONE repair action per failed answer.

Belongs here: a small ridge-regression core shared by LinUCB (Sherman-Morrison inverse updates)
and linear Thompson sampling, the paper's context-free Beta-Bernoulli Thompson sampling, the
context vector of Appendix B, the reward of Eq. 2 with its ablation variants, and the policy
state store (SQLite, atomic commits, export / import / reset).
"""
