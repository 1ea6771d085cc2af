"""A stored state read under a newer context layout whose features pool older ones.

When every feature of the new layout is one of the stored layout's or the sum of several of them
(each stored feature used once), x_new = M x_old for every context x, with M a 0/1 matrix. The
stored sums then map exactly: sum x_new x_new^T = M (sum x_old x_old^T) M^T and sum r x_new =
M (sum r x_old); counts and rewards are unchanged. So nothing learned is lost by the change, and
a state that is not such a pooling is refused as before (policy/store.py). A feature pooled from
nothing (`()`) is new: it was 0 in every stored context, so its row of M is 0.

>>> m = pooling_map(("a", "b", "c", "bias"), ("a", "bc", "bias"), {"bc": ("b", "c")})
>>> m.astype(int).tolist()
[[1, 0, 0, 0], [0, 1, 1, 0], [0, 0, 0, 1]]
>>> pooling_map(("a", "b", "bias"), ("a", "bias"), {}) is None  # b would be dropped
True
>>> pooling_map(("a", "bias"), ("a", "new", "bias"), {"new": ()}).astype(int).tolist()
[[1, 0], [0, 0], [0, 1]]
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import numpy as np

from ragmend.policy.store import PolicyStore
from ragmend.policy.types import ArmStats, PolicyState, frozen_array

log = logging.getLogger(__name__)


def pooling_map(
    stored: Sequence[str], wanted: Sequence[str], pooled_from: Mapping[str, tuple[str, ...]]
) -> np.ndarray | None:
    """M with x_wanted = M x_stored, or None where `wanted` is not a pooling of `stored`
    (`pooled_from`: a wanted feature's stored sources where the stored layout lacks it by name;
    any other is its own source)."""
    index = {name: j for j, name in enumerate(stored)}
    m = np.zeros((len(wanted), len(stored)))
    for i, name in enumerate(wanted):
        for source in (name,) if name in index else pooled_from.get(name, (name,)):
            j = index.get(source)
            if j is None or m[:, j].any():
                return None
            m[i, j] = 1.0
    return m if bool(m.any(axis=0).all()) else None


def remapped(state: PolicyState, m: np.ndarray, wanted: Sequence[str]) -> PolicyState:
    """`state`'s sums under the layout `wanted` (x_wanted = m x_stored)."""
    dim = len(wanted)
    arms = {
        arm: ArmStats(
            pulls=s.pulls,
            reward_sum=s.reward_sum,
            successes=s.successes,
            failures=s.failures,
            xtx=frozen_array(m @ np.asarray(s.xtx) @ m.T, (dim, dim)),
            xty=frozen_array(m @ np.asarray(s.xty), (dim,)),
        )
        for arm, s in state.arms.items()
    }
    return PolicyState(tuple(wanted), arms)


def upgrade_layout(
    store: PolicyStore, wanted: Sequence[str], pooled_from: Mapping[str, tuple[str, ...]]
) -> bool:
    """Rewrite `store`'s state under `wanted` where its layout pools into it; True when it did.
    A state of any other layout is left for the store's load to refuse."""
    if not pooled_from:
        return False
    state = store.export_state()
    if not state.feature_names or state.feature_names == tuple(wanted):
        return False
    m = pooling_map(state.feature_names, wanted, pooled_from)
    if m is None:
        return False
    store.import_state(remapped(state, m, wanted))
    stored = set(state.feature_names)
    pooled = [n for n in wanted if n not in stored and pooled_from.get(n)]
    new = [n for n in wanted if n not in stored and pooled_from.get(n) == ()]
    said = [f"{', '.join(pooled)} pooled"] if pooled else []
    said += [f"{', '.join(new)} new, 0 in what it learned"] if new else []
    log.warning(
        f"policy state: learned with {state.dim} context features, read under the current "
        f"{len(wanted)} ({'; '.join(said)}); its {state.total_pulls} updates kept"
    )
    return True
