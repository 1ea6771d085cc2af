"""The JSON form of a policy state (export / import), versioned, and its validation.

    {"schema": "ragmend.policy.state", "version": 1,
     "kind": "linucb", "dim": 35, "feature_names": [...],
     "ridge_lambda": 1.0, "beta_threshold": 0.4,
     "arms": {"rerank": {"pulls": 12, "reward_sum": 5.5, "successes": 7, "failures": 5,
                         "xtx": [[...d...] * d], "xty": [...d...],
                         "beta_alpha": 8, "beta_beta": 6}, ...}}

xtx and xty are the sums of Eq. 3 without the prior: A_a = ridge_lambda * I + xtx, b_a = xty.
beta_alpha / beta_beta (= 1 + successes, 1 + failures) are written for readers; import reads the
counts. Floats are written with Python's shortest round-trip repr, so export -> import is exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ragmend.errors import InputError
from ragmend.policy.types import POLICY_KINDS, ArmStats, PolicyState, frozen_array

SCHEMA = "ragmend.policy.state"
VERSION = 1


def state_to_json(
    state: PolicyState, *, kind: str, ridge_lambda: float, beta_threshold: float
) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "version": VERSION,
        "kind": kind,
        "dim": state.dim,
        "feature_names": list(state.feature_names),
        "ridge_lambda": ridge_lambda,
        "beta_threshold": beta_threshold,
        "arms": {
            arm: {
                "pulls": s.pulls,
                "reward_sum": s.reward_sum,
                "successes": s.successes,
                "failures": s.failures,
                "xtx": s.xtx.tolist(),
                "xty": s.xty.tolist(),
                "beta_alpha": 1 + s.successes,
                "beta_beta": 1 + s.failures,
            }
            for arm, s in sorted(state.arms.items())
        },
    }


def state_from_json(data: Any, *, feature_names: Sequence[str], arms: Sequence[str]) -> PolicyState:
    """A PolicyState from exported JSON, checked against this policy's context layout and arms.

    Raises InputError naming what does not fit: another schema or version, another context
    layout (dimension or feature names), an action this policy does not have, a malformed arm.
    Arms of this policy missing from the file start from zero.
    """
    if not isinstance(data, dict):
        raise InputError("policy state must be a JSON object")
    if data.get("schema") != SCHEMA:
        raise InputError(f"not a ragmend policy state (schema {data.get('schema')!r}, expected {SCHEMA!r})")
    if data.get("version") != VERSION:
        raise InputError(
            f"policy state version {data.get('version')!r} is not supported (expected {VERSION})"
        )
    if data.get("kind") not in POLICY_KINDS:
        raise InputError(f"policy state kind {data.get('kind')!r} is not one of {', '.join(POLICY_KINDS)}")
    names = tuple(feature_names)
    dim = len(names)
    got_names = data.get("feature_names")
    if data.get("dim") != dim or not isinstance(got_names, list) or len(got_names) != dim:
        raise InputError(
            f"policy state has {data.get('dim')} context features, this policy's context has {dim} "
            "(policy.context_dim or the feature layout differ)"
        )
    if tuple(got_names) != names:
        diff = [(i, g, w) for i, (g, w) in enumerate(zip(got_names, names, strict=True)) if g != w][:3]
        where = "; ".join(f"#{i}: {g!r} in the file, {w!r} here" for i, g, w in diff)
        raise InputError(f"policy state was learned with another context layout ({where})")
    raw_arms = data.get("arms")
    if not isinstance(raw_arms, dict):
        raise InputError("policy state 'arms' must be an object of action name -> statistics")
    unknown = sorted(set(raw_arms) - set(arms))
    if unknown:
        raise InputError(
            f"policy state has action(s) {unknown} this policy does not have ({', '.join(arms)})"
        )
    return PolicyState(names, {arm: _arm_from_json(arm, v, dim) for arm, v in raw_arms.items()})


def _arm_from_json(arm: str, v: Any, dim: int) -> ArmStats:
    if not isinstance(v, dict):
        raise InputError(f"policy state arm {arm!r} must be an object")
    try:
        pulls, successes, failures = (_count(v[k]) for k in ("pulls", "successes", "failures"))
        reward_sum = float(v["reward_sum"])
        xtx = np.array(v["xtx"], dtype=np.float64)
        xty = np.array(v["xty"], dtype=np.float64)
    except (KeyError, TypeError, ValueError) as e:
        raise InputError(f"policy state arm {arm!r} is malformed: {type(e).__name__}: {e}") from None
    if successes + failures != pulls:
        raise InputError(f"policy state arm {arm!r}: successes + failures must equal pulls")
    if xtx.shape != (dim, dim) or xty.shape != (dim,):
        raise InputError(
            f"policy state arm {arm!r}: xtx must be {dim}x{dim} and xty {dim} long, "
            f"got {xtx.shape} and {xty.shape}"
        )
    if not (np.all(np.isfinite(xtx)) and np.all(np.isfinite(xty)) and np.isfinite(reward_sum)):
        raise InputError(f"policy state arm {arm!r} holds a NaN or an infinity")
    # A sum of x x^T is symmetric with a non-negative diagonal; anything else was not made by us.
    if not np.allclose(xtx, xtx.T, rtol=1e-9, atol=1e-9) or np.any(np.diag(xtx) < 0):
        raise InputError(
            f"policy state arm {arm!r}: xtx is not a sum of x x^T (asymmetric or negative diagonal)"
        )
    return ArmStats(
        pulls=pulls,
        reward_sum=reward_sum,
        successes=successes,
        failures=failures,
        xtx=frozen_array(xtx, xtx.shape),
        xty=frozen_array(xty, xty.shape),
    )


def _count(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ValueError(f"counts must be integers >= 0, got {v!r}")
    return v
