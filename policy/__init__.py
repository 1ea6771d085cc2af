"""Repair policies: contextual bandits that pick ONE repair action per failed answer.

Belongs here: a small ridge-regression core shared by LinUCB (Sherman-Morrison inverse updates)
and linear Thompson sampling, the paper's context-free Beta-Bernoulli Thompson sampling, the
context vector of Appendix B, the reward of Eq. 2 with its ablation variants, and the policy
state store (SQLite, atomic commits, export / import / reset). docs/policy.md describes it all.

The engine uses the facade: Policy.from_settings (with the arm names), context, select, reward,
update. The policy sees arm names and plain budgets only, never the action catalogue.
"""

from ragmend.budgets import Budgets
from ragmend.policy.beta import BetaTS
from ragmend.policy.context import ContextBuilder
from ragmend.policy.facade import Policy, state_path
from ragmend.policy.linear import LinTS, LinUCB, RidgeArm
from ragmend.policy.reward import BUDGET_SCALES, Reward, compute_reward, reward_from_signals
from ragmend.policy.store import MemoryStore, PolicyStore, SQLiteStore
from ragmend.policy.types import POLICY_KINDS, ArmStats, ArmSummary, Decision, PolicyKind, PolicyState

__all__ = [
    "BUDGET_SCALES",
    "POLICY_KINDS",
    "ArmStats",
    "ArmSummary",
    "BetaTS",
    "Budgets",
    "ContextBuilder",
    "Decision",
    "LinTS",
    "LinUCB",
    "MemoryStore",
    "Policy",
    "PolicyKind",
    "PolicyState",
    "PolicyStore",
    "Reward",
    "RidgeArm",
    "SQLiteStore",
    "compute_reward",
    "reward_from_signals",
    "state_path",
]
