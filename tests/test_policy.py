"""The repair policy (policy/): ridge core, LinUCB / LinTS / BetaTS, context, reward (Eq. 2),
the SQLite state store with its durability under kill -9, and the Policy facade.
Pure numpy and sqlite: no model, no mock."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from ragmend.actions.catalogue import ACTION_NAMES
from ragmend.budgets import MB
from ragmend.diagnosis.types import Diagnosis, EGCFeatures, KGSignal, NLISignal
from ragmend.engine.engine import open_policy
from ragmend.errors import ConfigError, InputError
from ragmend.policy import (
    BUDGET_SCALES,
    BetaTS,
    Budgets,
    ContextBuilder,
    LinTS,
    LinUCB,
    MemoryStore,
    Policy,
    RidgeArm,
    SQLiteStore,
    compute_reward,
    reward_from_signals,
)
from ragmend.policy.exchange import state_from_json
from ragmend.policy.facade import ArmsDisabled
from ragmend.policy.reward import eq2_quality
from ragmend.policy.types import ArmStats
from ragmend.settings import PolicySettings, load_settings

REPO = Path(__file__).resolve().parent.parent
ARMS = PolicySettings().enabled_actions


def diagnosis(
    failure: str = "WR", e_q: str = "entail", e_r: str = "neutral", kappa: str = "missing"
) -> Diagnosis:
    def sig(state: str) -> NLISignal:
        return NLISignal(state, (), "test")  # type: ignore[arg-type]

    return Diagnosis(
        mode="qa",
        e_q=sig(e_q),
        e_r=sig(e_r),
        kg=KGSignal(kappa),  # type: ignore[arg-type]
        failure=failure,  # type: ignore[arg-type]
        egc=EGCFeatures(coverage=0, support_density=0, agreement=0, connectivity=0, isolation=0, score=0),
        evidence_conflict=False,
        stage="none",
        stage_reason="",
    )


def small_config(**kw: object) -> PolicySettings:
    # context_dim 0: x is the diagnosis signature + budgets + bias (19 features), no embedding.
    return PolicySettings(**{"context_dim": 0, **kw})


def signature_x(builder: ContextBuilder, i: int) -> np.ndarray:
    from ragmend.diagnosis.types import FAILURE_TYPES, KAPPAS, NLI_STATES

    return builder.build_from_signals(
        None,
        failure=FAILURE_TYPES[1 + i % 4],
        e_q=NLI_STATES[i % 3],
        e_r=NLI_STATES[(i // 3) % 3],
        kappa=KAPPAS[i % 4],
        latency_left_s=(i % 7) * 4.0,
        memory_left_bytes=None if i % 5 == 0 else (i % 6) * MB,
    )


# --- ridge core -----------------------------------------------------------------------------------


def test_sherman_morrison_inverse_equals_numpy_inverse() -> None:
    rng = np.random.default_rng(0)
    d = 12
    arm = RidgeArm(d, ridge_lambda=1.0, refresh_every=10**9)  # no periodic refresh: pure rank-1 updates
    A = np.eye(d)
    b = np.zeros(d)
    for _ in range(3000):
        x = rng.standard_normal(d) * rng.uniform(0.1, 3.0)
        r = float(rng.uniform())
        arm.partial_fit(x, r)
        A += np.outer(x, x)
        b += r * x
    assert arm.refreshes == 0  # no drift was detected either
    np.testing.assert_allclose(arm.A, A, rtol=1e-12)
    np.testing.assert_allclose(arm.A_inv, np.linalg.inv(A), rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(arm.theta, np.linalg.solve(A, b), rtol=1e-7, atol=1e-10)


def test_inverse_is_refreshed_periodically_and_on_drift() -> None:
    rng = np.random.default_rng(1)
    arm = RidgeArm(6, ridge_lambda=2.0, refresh_every=100)
    for _ in range(350):
        arm.partial_fit(rng.standard_normal(6), 1.0)
    assert arm.refreshes == 3 and arm.since_refresh == 50
    # Corrupt the kept inverse: the next update's residual check notices and re-inverts.
    arm.A_inv = arm.A_inv + 1e-3
    arm.partial_fit(rng.standard_normal(6), 0.0)
    assert arm.refreshes == 4 and arm.since_refresh == 0
    np.testing.assert_allclose(arm.A_inv, np.linalg.inv(arm.A), rtol=1e-10, atol=1e-12)


# --- LinUCB / LinTS / BetaTS ----------------------------------------------------------------------


def synthetic_problem(seed: int = 0) -> tuple[np.ndarray, np.random.Generator]:
    rng = np.random.default_rng(seed)
    return rng.uniform(-1, 1, size=(4, 6)), rng  # true theta of 4 arms over 5 features + bias


def test_linucb_learns_the_best_linear_arm_and_regret_falls() -> None:
    theta, rng = synthetic_problem()
    arms = ["a", "b", "c", "d"]
    pol = LinUCB(arms, 6, alpha=1.0, seed=3)
    regrets, best_picked = [], []
    for _ in range(3000):
        x = np.append(rng.uniform(0, 1, 5), 1.0)
        means = theta @ x
        choice = pol.select(x, arms).arm
        i = arms.index(choice)
        regrets.append(means.max() - means[i])
        best_picked.append(i == int(np.argmax(means)))
        pol.update(choice, x, means[i] + rng.normal(0, 0.1))
    first, last = np.mean(regrets[:300]), np.mean(regrets[-300:])
    assert last < 0.25 * first, (first, last)  # sublinear-ish: the per-round regret keeps falling
    assert np.mean(best_picked[-300:]) > 0.9
    # A context where one arm clearly wins: it is chosen, with or without exploration.
    x = np.array([1.0, 0, 0, 0, 0, 1.0])
    best = arms[int(np.argmax(theta @ x))]
    assert pol.select(x, arms).arm == best
    pol.set_alpha(0.0)
    assert pol.select(x, arms).arm == best


def test_alpha_zero_is_greedy_and_large_alpha_explores() -> None:
    pol = LinUCB(["good", "bad", "untried"], 2, alpha=0.0, seed=0)
    x = np.array([1.0, 1.0])
    for _ in range(20):
        pol.update("good", x, 0.8)
        pol.update("bad", x, 0.1)
    d = pol.select(x, ["good", "bad", "untried"])
    assert d.arm == "good" and all(v == 0.0 for v in d.explore.values())
    assert d.scores == d.exploit and d.exploit["untried"] == 0.0
    # Exploration bonus: the untried arm's uncertainty outweighs the known 0.8.
    pol.set_alpha(5.0)
    d = pol.select(x, ["good", "bad", "untried"])
    assert d.arm == "untried"
    assert d.explore["untried"] == pytest.approx(5.0 * math.sqrt(x @ np.eye(2) @ x))
    with pytest.raises(ValueError):
        pol.set_alpha(-1.0)


def test_ties_are_broken_at_random_not_always_first() -> None:
    pol = LinUCB(["a", "b", "c"], 3, alpha=2.0, seed=0)
    picks = {pol.select(np.ones(3), ["a", "b", "c"]).arm for _ in range(60)}
    assert picks == {"a", "b", "c"}
    # A caller whose order is a preference has ties go to the first in its order; no tie, no say.
    assert {pol.select(np.ones(3), ["b", "c", "a"], ties="first").arm for _ in range(20)} == {"b"}
    greedy = LinUCB(["a", "b", "c"], 3, alpha=0.1, seed=0)
    greedy.update("a", np.ones(3), 1.0)
    assert greedy.select(np.ones(3), ["b", "c", "a"], ties="first").arm == "a"


def test_beta_ts_binarises_at_threshold() -> None:
    pol = BetaTS(["a", "b"], 3, threshold=0.4, seed=0)
    x = np.zeros(3)
    pol.update("a", x, 0.4)  # at the threshold: a success
    pol.update("a", x, 0.39)
    pol.update("b", x, 0.0)
    assert pol.posterior("a") == (2, 2) and pol.posterior("b") == (1, 2)
    for _ in range(40):
        pol.update("a", x, 1.0)
        pol.update("b", x, 0.2)
    picks = [pol.select(x, ["a", "b"]).arm for _ in range(200)]
    assert picks.count("a") > 190
    d = pol.select(x, ["a", "b"])
    assert d.exploit["a"] == pytest.approx(42 / 44)  # Beta(1 + 41, 1 + 1)
    assert d.scores["a"] == pytest.approx(d.exploit["a"] + d.explore["a"])


def test_lints_is_reproducible_with_a_seed() -> None:
    def run(seed: int) -> list[tuple[str, float]]:
        pol = LinTS(["a", "b", "c"], 4, v=0.5, seed=seed)
        rng = np.random.default_rng(0)
        out = []
        for _ in range(50):
            x = rng.uniform(0, 1, 4)
            d = pol.select(x, ["a", "b", "c"])
            out.append((d.arm, d.score))
            pol.update(d.arm, x, float(x.sum() / 4))
        return out

    assert run(7) == run(7)
    assert run(7) != run(8)
    # A logged decision replays from its seed.
    pol = LinTS(["a", "b", "c"], 4, seed=1)
    x = np.array([0.2, 0.4, 0.6, 1.0])
    d = pol.select(x, ["a", "b", "c"])
    assert pol.select(x, ["a", "b", "c"], seed=d.seed) == d


def test_lints_samples_the_linear_posterior() -> None:
    # score ~ N(x^T theta, v^2 x^T A^-1 x): check mean and spread over many draws.
    pol = LinTS(["a"], 2, v=0.5, ridge_lambda=1.0, seed=0)
    x = np.array([1.0, 0.5])
    for _ in range(10):
        pol.update("a", x, 0.6)
    m = pol.models["a"]
    draws = np.array([pol.select(x, ["a"]).score for _ in range(4000)])
    assert draws.mean() == pytest.approx(m.predict(x), abs=0.01)
    assert draws.std() == pytest.approx(0.5 * math.sqrt(m.variance(x)), rel=0.05)


def test_only_feasible_arms_are_chosen() -> None:
    for pol in (
        LinUCB(["a", "b", "c"], 2, alpha=0.0, seed=0),
        LinTS(["a", "b", "c"], 2, seed=0),
        BetaTS(["a", "b", "c"], 2, seed=0),
    ):
        x = np.array([1.0, 1.0])
        for _ in range(30):
            pol.update("a", x, 1.0)  # "a" is by far the best arm ...
            pol.update("b", x, 0.0)
        for _ in range(100):
            d = pol.select(x, ["b", "c"])  # ... and masked
            assert d.arm in ("b", "c") and set(d.scores) == {"b", "c"} and d.masked == ("a",)
        with pytest.raises(InputError, match="no feasible action"):
            pol.select(x, [])
        with pytest.raises(InputError, match="unknown action"):
            pol.select(x, ["a", "zzz"])
        with pytest.raises(InputError, match="unknown action"):
            pol.update("zzz", x, 1.0)
        with pytest.raises(InputError, match="vector of 2"):
            pol.select(np.ones(3), ["a"])
        with pytest.raises(InputError, match="finite"):
            pol.update("a", x, float("nan"))


# --- reward (Eq. 2) -------------------------------------------------------------------------------


def r(variant: str = "paper", budgets: Budgets | None = None, **kw: object):
    args = {
        "failure": "NoFailure",
        "kappa": "consistent",
        "e_r": "entail",
        "latency_s": 1.5,
        "memory_bytes": 3 * MB,
    }
    args.update(kw)
    return reward_from_signals(**args, budgets=budgets or Budgets(3.0, 6 * MB), variant=variant)  # type: ignore[arg-type]


def test_reward_paper_variant_by_hand() -> None:
    full = r()
    assert full.quality == 1.0 and full.latency_factor == 0.5 and full.memory_factor == 0.5
    assert full.total == 0.25 and full.violated == () and full.memory_measured
    # Quality 1/4 (0 + 0 + 2): still failing (WR), no KG match, response entailed.
    part = r(failure="WR", kappa="missing", latency_s=0.75, memory_bytes=0)
    assert part.quality == 0.5 and part.total == pytest.approx(0.5 * 0.75 * 1.0)
    assert r(failure="IE", kappa="conflict", e_r="neutral").total == 0.0
    assert r(failure="NoFailure", kappa="missing", e_r="neutral").quality == 0.25
    # Over budget: the hard gate zeroes the reward, whatever the quality.
    over = r(latency_s=3.5)
    assert over.total == 0.0 and over.latency_factor == 0.0 and over.violated == ("latency",)
    assert r(memory_bytes=7 * MB).violated == ("memory",) and r(memory_bytes=7 * MB).total == 0.0
    # Exactly at budget: feasible (gate 1) but the soft factor is 0.
    at = r(latency_s=3.0)
    assert at.total == 0.0 and at.violated == ()
    # Memory freed during the pass counts as no additional memory.
    assert r(memory_bytes=-1000).memory_factor == 1.0


def test_reward_with_unmeasured_memory() -> None:
    rw = r(memory_bytes=None, latency_s=1.5)
    assert not rw.memory_measured and rw.memory_factor == 1.0 and rw.memory_bytes is None
    assert rw.total == 0.5 and rw.violated == ()  # only latency discounts; memory neither gates nor counts
    assert r("unweighted", memory_bytes=None).total == 1.0


def test_reward_variants_by_hand() -> None:
    # Unweighted: gates only.
    assert r("unweighted").total == 1.0
    assert r("unweighted", latency_s=2.99).total == 1.0
    assert r("unweighted", latency_s=3.01).total == 0.0
    assert r("unweighted", latency_s=3.0).total == 1.0  # at budget is within it
    # Unconstrained: soft factors only, no gate, not clipped: an overrun is a growing penalty.
    assert r("unconstrained").total == 0.25
    over = r("unconstrained", latency_s=3.6)
    assert over.total == pytest.approx(-0.2 * 0.5) and over.violated == ("latency",)
    assert r("unconstrained", latency_s=4.5).total < over.total < r("paper", latency_s=3.6).total == 0.0
    # Two overruns never multiply back to a reward.
    assert r("unconstrained", latency_s=7.0, memory_bytes=12 * MB).total < 0
    with pytest.raises(InputError, match="variant"):
        r("bogus")
    with pytest.raises(InputError, match="latency"):
        r(latency_s=-0.1)


def test_reward_budget_scales() -> None:
    base = Budgets(3.0, 6 * MB)
    stringent, relaxed = base.scaled(BUDGET_SCALES["stringent"]), base.scaled(BUDGET_SCALES["relaxed"])
    assert stringent.latency_s == pytest.approx(2.1) and relaxed.memory_bytes == pytest.approx(9 * MB)
    # 1.5 s and 3 MB: factors 1 - 1.5/2.1 and 1 - 3/4.2 (Stringent), 1 - 1.5/4.5 and 1 - 3/9 (Relaxed).
    assert r(budgets=stringent).total == pytest.approx((1 - 1.5 / 2.1) * (1 - 3 / 4.2))
    assert r(budgets=relaxed).total == pytest.approx((2 / 3) ** 2)
    # 2.5 s: over the Stringent budget, within the others.
    assert r(budgets=stringent, latency_s=2.5).total == 0.0
    assert r(budgets=base, latency_s=2.5).total == pytest.approx((1 - 2.5 / 3) * 0.5)
    assert r(budgets=relaxed, latency_s=2.5).total == pytest.approx((1 - 2.5 / 4.5) * (2 / 3))


def test_reward_from_a_diagnosis_and_policy_settings() -> None:
    after = diagnosis(failure="NoFailure", e_q="entail", e_r="entail", kappa="consistent")
    assert compute_reward(after, 0.3, None, Budgets()).total == pytest.approx(0.9)
    # The paper's 3 s per-action budget (the default is 12 s: a CPU generator, docs/policy.md).
    pol = Policy.in_memory(
        ACTION_NAMES, small_config(budget_scale=1.5, reward_variant="unweighted", latency_budget_s=3.0)
    )
    rw = pol.reward(after, 4.0, 8 * MB)
    assert rw.budgets == Budgets(4.5, 9 * MB) and rw.total == 1.0 and rw.variant == "unweighted"


def test_a_repair_earns_the_graded_verdict_where_the_diagnosis_has_one() -> None:
    import dataclasses

    from ragmend.diagnosis.types import Verdict

    def judged(failure: str, p_unsupported: float) -> Diagnosis:
        verdict = Verdict(
            p_unsupported=p_unsupported,
            threshold=0.55,
            unsupported=p_unsupported >= 0.55,
            rule_failure=failure,  # type: ignore[arg-type]
            features={},
        )
        return dataclasses.replace(diagnosis(failure, e_r="entail"), verdict=verdict)

    doubted = compute_reward(judged("WR", 0.58), 0.0, None, Budgets())  # flagged, barely
    refuted = compute_reward(judged("WR", 0.95), 0.0, None, Budgets())
    passed = compute_reward(judged("NoFailure", 0.1), 0.0, None, Budgets())
    assert doubted.quality == pytest.approx(0.42) and refuted.quality == pytest.approx(0.05)
    assert passed.quality == pytest.approx(0.9) and passed.response_entailed
    # Eq. 2's indicators gave both flagged answers the same 0.5 (e_r entail, a failure).
    assert eq2_quality("WR", "missing", "entail") == 0.5


def test_presenting_a_conflict_earns_its_strength_and_nothing_without_one() -> None:
    import dataclasses

    from ragmend.diagnosis.types import ConflictSide, EvidenceConflict

    sides = (ConflictSide(("p1",), "A", takes_answer=True), ConflictSide(("p2",), "B", takes_answer=False))
    conflict = EvidenceConflict("c", sides, 0.8)
    contested = dataclasses.replace(diagnosis(e_r="entail"), evidence_conflict=True, conflict=conflict)
    shown = compute_reward(contested, 0.0, None, Budgets(), presented_conflict=True)
    # The answer's own entailment does not count: what was said is both sides, not the answer.
    assert shown.quality == pytest.approx(0.8) and not shown.response_entailed
    assert compute_reward(contested, 1.5, None, Budgets(3.0, MB)).quality == pytest.approx(0.5)
    assert compute_reward(diagnosis(), 0.0, None, Budgets(), presented_conflict=True).total == 0.0
    with pytest.raises(InputError, match="not both"):
        compute_reward(contested, 0.0, None, Budgets(), abstained=True, presented_conflict=True)


# --- context --------------------------------------------------------------------------------------


def test_context_layout() -> None:
    b = ContextBuilder(context_dim=16, projection_seed=3, latency_budget_s=30.0, memory_budget_bytes=6 * MB)
    names = b.feature_names()
    assert b.dim == len(names) == 16 + 5 + 3 + 3 + 4 + 4
    emb = np.random.default_rng(0).standard_normal(384)
    x = b.build(emb, diagnosis("IE", e_q="neutral", e_r="contradict", kappa="no_triplet"), 45.0, 1.5 * MB)
    assert x.shape == (b.dim,) and x.dtype == np.float64
    on = {n for n, v in zip(names, x, strict=True) if not n.startswith("emb_") and v == 1.0}
    assert on == {"failure=IE", "e_q=neutral", "e_r=contradict", "kappa=no_triplet", "latency_left", "bias"}
    assert x[names.index("latency_left")] == 1.0  # 45 s left of 30: clipped
    assert x[names.index("memory_left")] == 0.25 and x[names.index("memory_unmeasured")] == 0.0
    # Unit-norm input, JL projection: the semantic part keeps about unit norm.
    assert 0.5 < np.linalg.norm(x[:16]) < 1.5
    # Scale-free in the embedding; negative budgets clip to 0; unmeasured memory says so.
    y = b.build(emb * 7.0, diagnosis("IE", e_q="neutral", e_r="contradict", kappa="no_triplet"), -1.0, None)
    np.testing.assert_allclose(y[:16], x[:16])
    assert y[names.index("latency_left")] == 0.0
    assert y[names.index("memory_left")] == 1.0 and y[names.index("memory_unmeasured")] == 1.0


def test_context_projection_is_fixed_by_its_seed() -> None:
    emb = np.random.default_rng(1).standard_normal(384)
    d = diagnosis()
    x1 = ContextBuilder(projection_seed=5).build(emb, d, 10.0, None)
    x2 = ContextBuilder(projection_seed=5).build(emb, d, 10.0, None)  # another instance, same seed
    x3 = ContextBuilder(projection_seed=6).build(emb, d, 10.0, None)
    np.testing.assert_array_equal(x1, x2)
    assert not np.allclose(x1[:16], x3[:16])
    none = ContextBuilder(context_dim=0)
    assert none.dim == 19 and none.build(None, d, 10.0, None).shape == (19,)
    with pytest.raises(InputError, match="embedding is required"):
        ContextBuilder().build(None, d, 10.0, None)
    with pytest.raises(InputError, match="unknown kappa"):
        none.build_from_signals(
            None, failure="WR", e_q="entail", e_r="entail", kappa="??", latency_left_s=1, memory_left_bytes=0
        )


# --- store ----------------------------------------------------------------------------------------


def test_sqlite_store_round_trip_across_reopen(tmp_path: Path) -> None:
    names = [f"f{i}" for i in range(5)]
    path = tmp_path / "p.sqlite"
    store, mem = SQLiteStore(path), MemoryStore()
    for s in (store, mem):
        s.load(names, ["a", "b"])
    rng = np.random.default_rng(0)
    for i in range(40):
        x, rew = rng.standard_normal(5), float(rng.uniform())
        for s in (store, mem):
            s.apply("ab"[i % 2], x, rew, rew >= 0.4)
    store.close()
    again = SQLiteStore(path).load(names, ["a", "b", "c"])
    want = mem.export_state()
    assert set(again.arms) == {"a", "b", "c"} and again.arms["c"].pulls == 0
    for arm in ("a", "b"):
        assert again.arms[arm].same_as(want.arms[arm])  # bit-exact: same sums in the same order
    assert again.total_pulls == 40
    with pytest.raises(ConfigError, match="context features"):
        SQLiteStore(path).load(names[:4], ["a"])


def test_policy_export_import_reset(tmp_path: Path) -> None:
    cfg = small_config()
    pol = Policy(cfg, SQLiteStore(tmp_path / "a.sqlite"), ACTION_NAMES)
    for i in range(30):
        x = signature_x(pol.builder, i)
        pol.update(ARMS[i % 3], x, (i % 5) / 4)
    exported = json.loads(json.dumps(pol.export_state()))  # through real JSON text
    assert exported["schema"] == "ragmend.policy.state" and exported["version"] == 1
    assert exported["kind"] == "linucb" and exported["dim"] == 19
    arm0 = exported["arms"][ARMS[0]]
    assert arm0["pulls"] == 10 and arm0["beta_alpha"] == 1 + arm0["successes"]
    # Into another policy (another kind even: the sums serve every kind), and back out unchanged.
    other = Policy(small_config(kind="beta_ts"), SQLiteStore(tmp_path / "b.sqlite"), ACTION_NAMES)
    other.import_state(exported)
    again = other.export_state()
    assert again["arms"] == exported["arms"] and again["kind"] == "beta_ts"
    assert other.stats()[ARMS[0]].pulls == 10
    assert other.bandit.posterior(ARMS[0]) == (arm0["beta_alpha"], arm0["beta_beta"])  # type: ignore[attr-defined]
    # A LinUCB importing it gets the same coefficients as the policy that learned them.
    third = Policy(cfg, MemoryStore(), ACTION_NAMES)
    third.import_state(exported)
    for arm in ARMS[:3]:
        assert third.coefficients(arm) == pytest.approx(pol.coefficients(arm), rel=1e-12, abs=1e-15)
    pol.reset()
    assert all(s.pulls == 0 for s in pol.stats().values())
    assert all(v == 0 for v in pol.coefficients(ARMS[0]).values())
    assert pol.export_state()["arms"] == {}
    # Reset forgets the layout too: a reopened file accepts the (same or a new) layout.
    assert Policy(cfg, SQLiteStore(tmp_path / "a.sqlite"), ACTION_NAMES).stats()[ARMS[0]].pulls == 0


def test_import_errors_are_clear(tmp_path: Path) -> None:
    pol = Policy(small_config(), MemoryStore(), ACTION_NAMES)
    pol.update(ARMS[0], signature_x(pol.builder, 1), 0.5)
    good = pol.export_state()

    def bad(mutate) -> dict:
        data = json.loads(json.dumps(good))
        mutate(data)
        return data

    names, arms = pol.builder.feature_names(), pol.arms
    cases = [
        ([1, 2], "JSON object"),
        (bad(lambda d: d.update(schema="other")), "not a ragmend policy state"),
        (bad(lambda d: d.update(version=2)), "version 2"),
        (bad(lambda d: d.update(kind="eps_greedy")), "kind"),
        (bad(lambda d: d.update(dim=35)), "35 context features, this policy's context has 19"),
        (bad(lambda d: d["feature_names"].__setitem__(0, "emb_0")), "another context layout"),
        (bad(lambda d: d["arms"].update(teleport=d["arms"][ARMS[0]])), "teleport"),
        (bad(lambda d: d["arms"][ARMS[0]].update(pulls=5)), "successes \\+ failures"),
        (bad(lambda d: d["arms"][ARMS[0]].update(xty=[0.0] * 3)), "19 long"),
        (bad(lambda d: d["arms"][ARMS[0]].pop("xtx")), "malformed"),
        (bad(lambda d: d["arms"][ARMS[0]].update(pulls=-1)), "malformed"),
        (bad(lambda d: d["arms"][ARMS[0]]["xtx"][0].__setitem__(1, 5.0)), "asymmetric"),
    ]
    for data, message in cases:
        with pytest.raises(InputError, match=message):
            state_from_json(data, feature_names=names, arms=arms)
        with pytest.raises(InputError, match=message):
            pol.import_state(data)
    # A failed import leaves the state as it was.
    assert pol.export_state() == good


KILL_CHILD = """
import sys
from pathlib import Path
from ragmend.actions.catalogue import ACTION_NAMES
from ragmend.policy import Policy, SQLiteStore
from ragmend.settings import PolicySettings
from tests.test_policy import ARMS, signature_x
pol = Policy(PolicySettings(context_dim=0), SQLiteStore(Path(sys.argv[1])), ACTION_NAMES)
i = 0
while True:
    pol.update(ARMS[i % 6], signature_x(pol.builder, i), (i % 9) / 8)
    print(i + 1, flush=True)  # acknowledged: update() returned
    i += 1
"""

READ_CHILD = """
import json, sys
from pathlib import Path
from ragmend.actions.catalogue import ACTION_NAMES
from ragmend.policy import Policy, SQLiteStore
from ragmend.settings import PolicySettings
pol = Policy(PolicySettings(context_dim=0), SQLiteStore(Path(sys.argv[1])), ACTION_NAMES)
print(json.dumps(pol.export_state()))
"""


def test_no_acknowledged_update_is_lost_to_kill_9(tmp_path: Path) -> None:
    path, acked = tmp_path / "policy.sqlite", 150
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen(
        [sys.executable, "-c", KILL_CHILD, str(path)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=env,
    )
    assert child.stdout is not None
    try:
        for line in child.stdout:
            if int(line) == acked:
                os.kill(child.pid, signal.SIGKILL)  # right after the acknowledgement, mid-stream
                break
    finally:
        child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL
    out = subprocess.run(
        [sys.executable, "-c", READ_CHILD, str(path)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        check=True,
    )
    seen = json.loads(out.stdout)
    total = sum(a["pulls"] for a in seen["arms"].values())
    assert total >= acked  # every acknowledged update; perhaps a few more it made before the signal
    # And they are exactly the first `total` updates, nothing half-written.
    replay = Policy(small_config(), MemoryStore(), ACTION_NAMES)
    for i in range(total):
        replay.update(ARMS[i % 6], signature_x(replay.builder, i), (i % 9) / 8)
    assert seen["arms"] == replay.export_state()["arms"]


# --- the Policy facade ----------------------------------------------------------------------------


def test_policy_from_settings_survives_a_restart(tmp_path: Path) -> None:
    settings = load_settings(
        data_dir=tmp_path, policy={"context_dim": 8, "kind": "lints", "seed": 4, "latency_budget_s": 3.0}
    )
    pol = open_policy(settings)
    assert pol.store.path == tmp_path / "policy.sqlite" and pol.kind == "lints" and pol.dim == 27  # type: ignore[attr-defined]
    emb = np.random.default_rng(0).standard_normal(384)
    x = pol.context(emb, diagnosis(), 12.0, 2 * MB)
    d = pol.select(x, ["rerank", "depth"])
    assert pol.update(d.arm, x, pol.reward(diagnosis("NoFailure", e_r="entail", kappa="consistent"), 1.0, MB))
    pol.close()
    again = open_policy(settings)
    assert again.stats()[d.arm].pulls == 1
    assert again.stats()[d.arm].mean_reward == pytest.approx((1 - 1 / 3) * (1 - 1 / 6))
    assert again.coefficients(d.arm) == pytest.approx(pol.coefficients(d.arm))


def test_frozen_policy_selects_but_never_learns(tmp_path: Path) -> None:
    pol = Policy(small_config(), SQLiteStore(tmp_path / "p.sqlite"), ACTION_NAMES)
    x = signature_x(pol.builder, 3)
    pol.update("rerank", x, 1.0)
    before = pol.export_state()
    coefficients = {a: pol.coefficients(a) for a in ARMS}
    pol.configure(learn=False)
    assert not pol.learn
    for _ in range(20):
        d = pol.select(x, ARMS)
        assert pol.update(d.arm, x, 1.0) is False
    assert pol.export_state() == before
    assert {a: pol.coefficients(a) for a in ARMS} == coefficients
    # In memory unchanged too (the reopened one inverts A afresh: equal to rounding).
    reopened = Policy(small_config(), SQLiteStore(tmp_path / "p.sqlite"), ACTION_NAMES)
    assert pol.coefficients("rerank") == pytest.approx(reopened.coefficients("rerank"), rel=1e-12, abs=1e-15)
    frozen = Policy(small_config(learn=False), SQLiteStore(tmp_path / "p.sqlite"), ACTION_NAMES)
    assert frozen.update("depth", x, 1.0) is False and frozen.stats()["depth"].pulls == 0


def test_set_alpha_at_runtime() -> None:
    pol = Policy.in_memory(ACTION_NAMES, small_config(alpha=2.0))
    x = signature_x(pol.builder, 2)
    assert pol.select(x, ["rerank"]).explore["rerank"] == pytest.approx(2.0 * np.linalg.norm(x))
    pol.configure(alpha=0.5)
    assert pol.alpha == 0.5
    assert pol.select(x, ["rerank"]).explore["rerank"] == pytest.approx(0.5 * np.linalg.norm(x))
    with pytest.raises(InputError):
        pol.configure(alpha=-1)
    # On another kind the setting is kept; it is in force again when the kind is linucb.
    lints = Policy.in_memory(ACTION_NAMES, small_config(kind="lints"))
    assert lints.configure(alpha=1.7) == ("alpha",) and lints.alpha is None
    assert lints.configure(kind="linucb") == ("kind",) and lints.alpha == 1.7


def test_replicas_sharing_one_store_merge_their_updates(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    one, two = (Policy(small_config(), SQLiteStore(path), ACTION_NAMES) for _ in range(2))
    for i in range(10):
        one.update("rerank", signature_x(one.builder, i), 0.5)
    for i in range(10, 15):
        two.update("rerank", signature_x(two.builder, i), 1.0)  # the first sees one's 10 as well
    assert two.stats()["rerank"].pulls == 15
    one.reload()
    assert one.stats()["rerank"].pulls == 15
    single = Policy(small_config(), MemoryStore(), ACTION_NAMES)
    for i in range(15):
        single.update("rerank", signature_x(single.builder, i), 0.5 if i < 10 else 1.0)
    for pol in (one, two):
        assert pol.coefficients("rerank") == pytest.approx(single.coefficients("rerank"), rel=1e-9, abs=1e-12)


def test_policy_is_thread_safe(tmp_path: Path) -> None:
    pol = Policy(small_config(), SQLiteStore(tmp_path / "p.sqlite", synchronous="NORMAL"), ACTION_NAMES)
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        try:
            for i in range(25):
                x = signature_x(pol.builder, k * 100 + i)
                d = pol.select(x, ARMS[:4])
                pol.update(d.arm, x, (i % 4) / 3)
        except BaseException as e:  # collected: an exception in a thread would otherwise pass silently
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sum(s.pulls for s in pol.stats().values()) == 100
    assert (
        Policy(small_config(), SQLiteStore(tmp_path / "p.sqlite"), ACTION_NAMES).export_state()
        == pol.export_state()
    )


def test_policy_settings() -> None:
    p = PolicySettings()
    assert (p.kind, p.alpha, p.beta_threshold, p.context_dim, p.reward_variant) == (
        "linucb",
        2.0,
        0.4,
        16,
        "paper",
    )
    assert (p.latency_budget_s, p.memory_budget_bytes, p.budget_scale) == (12.0, 6 * MB, 1.0)
    assert set(p.enabled_actions) == set(ACTION_NAMES)  # every arm of the catalogue, by default
    with pytest.raises(ConfigError, match=r"policy\.kind"):
        load_settings(policy={"kind": "eps_greedy"})
    with pytest.raises(ConfigError, match="enabled_actions"):
        load_settings(policy={"enabled_actions": ["rerank", "rerank"]})


def test_policy_settings_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGMEND_POLICY__KIND", "beta_ts")
    monkeypatch.setenv("RAGMEND_POLICY__BUDGET_SCALE", "0.7")
    s = load_settings()
    assert s.policy.kind == "beta_ts" and s.policy.budget_scale == 0.7
    assert isinstance(open_policy(s, store=MemoryStore()).bandit, BetaTS)


def test_arm_stats_are_sums() -> None:
    x1, x2 = np.array([1.0, 2.0]), np.array([0.5, -1.0])
    s = ArmStats.zero(2).plus(x1, 0.5, True).plus(x2, 0.25, False)
    np.testing.assert_array_equal(s.xtx, np.outer(x1, x1) + np.outer(x2, x2))
    np.testing.assert_array_equal(s.xty, 0.5 * x1 + 0.25 * x2)
    assert (s.pulls, s.successes, s.failures, s.mean_reward) == (2, 1, 1, 0.375)
    with pytest.raises(ValueError):
        s.xtx[0, 0] = 1.0  # frozen value, frozen arrays


# --- MABWiser as the oracle of LinUCB -------------------------------------------------------------


@pytest.mark.parametrize(("alpha", "l2_lambda"), [(2.0, 1.0), (0.5, 2.5), (0.0, 1.0)])
def test_linucb_equals_mabwiser(alpha: float, l2_lambda: float) -> None:
    mab = pytest.importorskip("mabwiser.mab")  # a test-only oracle (the `dev` extra)
    arms, d = ["a", "b", "c", "d"], 7
    rng = np.random.default_rng(11)
    truth = rng.uniform(-1, 1, size=(len(arms), d))
    ours = LinUCB(arms, d, alpha=alpha, ridge_lambda=l2_lambda, seed=0)
    # scale=False (MABWiser's default): scale=True would standardise the contexts with a running
    # StandardScaler before its regression, another model; ours takes x as given.
    oracle = mab.MAB(arms, mab.LearningPolicy.LinUCB(alpha=alpha, l2_lambda=l2_lambda, scale=False), seed=0)
    # MABWiser cannot predict before a first fit: one observation of each arm, fed to both.
    warm_x, warm_r = rng.uniform(0, 1, size=(len(arms), d)), rng.uniform(0, 1, size=len(arms))
    oracle.fit(arms, warm_r, warm_x)
    for arm, x, reward in zip(arms, warm_x, warm_r, strict=True):
        ours.update(arm, x, float(reward))
    for _ in range(300):
        x = np.append(rng.uniform(0, 1, d - 1), 1.0)
        decision = ours.select(x, arms)
        # Its expectations are LinUCB's scores: x^T beta + alpha sqrt(x^T A^-1 x).
        expected = oracle.predict_expectations(x[None, :])
        assert decision.scores == pytest.approx(expected, rel=1e-9, abs=1e-12)
        # MABWiser takes the first of tied arms (np.argmax), ours a random one; continuous contexts
        # leave no ties here (checked), so the choices must be the same.
        top = sorted(expected.values())
        assert top[-1] - top[-2] > 1e-9
        assert decision.arm == oracle.predict(x[None, :])
        reward = float(truth[arms.index(decision.arm)] @ x + rng.normal(0, 0.1))
        ours.update(decision.arm, x, reward)
        oracle.partial_fit([decision.arm], [reward], x[None, :])
    for arm in arms:
        theirs, mine = oracle._imp.arm_to_model[arm], ours.models[arm]
        # The sums are the same additions in the same order: equal to the last bit.
        np.testing.assert_array_equal(mine.A, theirs.A)
        np.testing.assert_array_equal(mine.b, theirs.Xty)
        # The inverse and theta: Sherman-Morrison against np.linalg.inv per update, equal to rounding.
        np.testing.assert_allclose(mine.A_inv, theirs.A_inv, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(ours.coefficients(arm), theirs.beta, rtol=1e-9, atol=1e-12)
    assert sum(m.refreshes for m in ours.models.values()) == 0  # no re-inversion helped it


def test_the_benchmarks_inverse_baseline_is_the_same_linucb() -> None:
    from ragmend.bench.speed.policy import InverseLinUCB, Workload

    work = Workload(32, 5, 200)
    fast, slow = LinUCB(work.arms, 32, seed=4), InverseLinUCB(work.arms, 32, seed=4)
    for t, x in enumerate(work.contexts):
        a, b = fast.select(x, work.arms), slow.select(x, work.arms)
        assert a.arm == b.arm and a.scores == pytest.approx(b.scores, rel=1e-9, abs=1e-12)
        fast.update(a.arm, x, work.reward(t, a.arm))
        slow.update(b.arm, x, work.reward(t, b.arm))
    for arm in work.arms:
        np.testing.assert_allclose(fast.coefficients(arm), slow.coefficients(arm), rtol=1e-9, atol=1e-12)


# --- a simulated environment: one best action per failure type ------------------------------------

BEST_ARM = {"WP": "rewrite_paraphrase", "IE": "rerank", "WR": "mode_switch", "LEM": "depth"}


def test_simulated_environment_regret_falls_and_the_mapping_is_recovered() -> None:
    from ragmend.diagnosis.types import KAPPAS, NLI_STATES

    rng = np.random.default_rng(0)
    # The world: for each failure type one action repairs the answer 85% of the time, the others
    # 5-35%. A repaired answer is diagnosed NoFailure, KG-consistent, entailed; a failed repair
    # keeps its failure. Rewards are Eq. 2 on those diagnoses (0.6 s, memory unmeasured).
    p_repair = {
        failure: {arm: 0.85 if arm == best else float(rng.uniform(0.05, 0.35)) for arm in ARMS}
        for failure, best in BEST_ARM.items()
    }
    pol = Policy.in_memory(
        ACTION_NAMES, PolicySettings(context_dim=8, alpha=1.0, seed=3)
    )  # embeddings as noise

    def observe() -> tuple[str, np.ndarray]:
        failure = str(rng.choice(list(BEST_ARM)))
        before = diagnosis(failure, str(rng.choice(NLI_STATES)), "neutral", str(rng.choice(KAPPAS)))
        memory_left = None if rng.uniform() < 0.5 else float(rng.uniform(0, 6 * MB))
        return failure, pol.context(rng.standard_normal(384), before, float(rng.uniform(5, 30)), memory_left)

    full = pol.reward(diagnosis("NoFailure", e_r="entail", kappa="consistent"), 0.6, None).total
    regret = []
    for _ in range(2400):
        failure, x = observe()
        arm = pol.select(x, ARMS).arm
        repaired = rng.uniform() < p_repair[failure][arm]
        after = (
            diagnosis("NoFailure", e_r="entail", kappa="consistent")
            if repaired
            else diagnosis(failure, e_r="neutral", kappa="missing")
        )
        pol.update(arm, x, pol.reward(after, 0.6, None))
        # Expected reward of an arm: P(repair) * the full reward (a failed repair earns 0).
        regret.append(full * (p_repair[failure][BEST_ARM[failure]] - p_repair[failure][arm]))
    windows = np.asarray(regret).reshape(8, 300).mean(axis=1)  # per-window mean regret
    assert windows[-1] < 0.3 * windows[0], windows
    assert windows[4:].mean() < windows[:4].mean() and all(w < windows[0] for w in windows[2:]), windows
    # The learned mapping: greedy choices (no exploration) are the best action of each failure
    # type, whatever the rest of the context.
    pol.configure(alpha=0.0)
    for _ in range(200):
        failure, x = observe()
        assert pol.select(x, ARMS).arm == BEST_ARM[failure]


# --- unusable state files, invalid settings -------------------------------------------------------


def _state_file(path: Path, case: str) -> str:
    """Write a state file that must be refused; returns a phrase the refusal must contain."""
    import sqlite3

    if case == "not_sqlite":
        path.write_bytes(b"policy: this is a text file, not a database\n" * 40)
        return "not a database"
    if case == "foreign_tables":
        db = sqlite3.connect(path)
        db.execute("CREATE TABLE documents (id TEXT PRIMARY KEY, text TEXT)")
        db.execute("INSERT INTO documents VALUES ('d1', 'somebody else''s data')")
        db.commit()
        db.close()
        return "documents"
    if case == "other_dims":
        pol = Policy(small_config(context_dim=4), SQLiteStore(path), ACTION_NAMES)
        pol.update("rerank", pol.context(np.ones(8), diagnosis(), 10.0, None), 0.5)
        pol.close()
        return "23 context features and this configuration builds 19"
    if case == "other_arms":  # an action this ragmend's catalogue does not have
        store, names = SQLiteStore(path), ContextBuilder(context_dim=0).feature_names()
        store.load(names, ["rerank", "teleport"])
        store.apply("teleport", np.ones(len(names)), 0.5, True)
        store.close()
        return "['teleport']"
    pol = Policy(small_config(), SQLiteStore(path), ACTION_NAMES)
    pol.update("rerank", signature_x(pol.builder, 1), 0.5)
    pol.close()
    db = sqlite3.connect(path)
    if case == "schema_version":
        db.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
        phrase = "schema version '99'"
    else:  # damaged_row
        db.execute("UPDATE arms SET xty = x'0102'")
        phrase = "damaged"
    db.commit()
    db.close()
    return phrase


@pytest.mark.parametrize(
    "case", ["not_sqlite", "foreign_tables", "schema_version", "other_dims", "other_arms", "damaged_row"]
)
def test_an_unusable_state_file_is_refused_and_kept_aside(tmp_path: Path, case: str) -> None:
    path = tmp_path / "policy.sqlite"
    phrase = _state_file(path, case)
    original = path.read_bytes()
    with pytest.raises(ConfigError) as refused:
        Policy(small_config(), SQLiteStore(path), ACTION_NAMES)
    message = str(refused.value)
    aside = list(tmp_path.glob("policy.sqlite.corrupt-*"))
    assert len(aside) == 1 and aside[0].name.startswith("policy.sqlite.corrupt-")
    assert str(path) in message and str(aside[0]) in message and phrase in message, message
    assert aside[0].read_bytes() == original  # kept exactly as it was: never written to
    assert not path.exists()
    # The next start begins afresh beside it; the kept file is left alone.
    fresh = Policy(small_config(), SQLiteStore(path), ACTION_NAMES)
    assert fresh.stats()["rerank"].pulls == 0
    fresh.update("rerank", signature_x(fresh.builder, 2), 1.0)
    fresh.close()
    assert aside[0].read_bytes() == original
    if case == "other_dims":  # still readable under the configuration that made it
        kept = Policy(small_config(context_dim=4), SQLiteStore(aside[0]), ACTION_NAMES)
        assert kept.stats()["rerank"].pulls == 1


def test_a_refused_state_never_overwrites_an_earlier_one(tmp_path: Path) -> None:
    from ragmend.policy.store import set_aside

    path = tmp_path / "policy.sqlite"
    for i in range(3):  # three in the same second: three names
        path.write_text(f"garbage {i}")
        Path(f"{path}-wal").write_text(f"wal {i}")
        set_aside(path)
    kept = sorted(tmp_path.glob("policy.sqlite.corrupt-*"))
    assert len(kept) == 6 and not path.exists()
    mains = [p for p in kept if not p.name.endswith("-wal")]
    assert sorted(p.read_text() for p in mains) == ["garbage 0", "garbage 1", "garbage 2"]
    # Each WAL went with its file, under the name SQLite looks for beside it.
    assert all(Path(f"{p}-wal").read_text() == "wal " + p.read_text()[-1] for p in mains)


def test_a_state_path_that_cannot_be_opened_is_not_moved(tmp_path: Path) -> None:
    path = tmp_path / "policy.sqlite"
    path.mkdir()  # a directory: SQLite cannot open it, but it is not a damaged state file
    with pytest.raises(ConfigError, match="cannot be opened"):
        SQLiteStore(path)
    assert path.is_dir() and not list(tmp_path.glob("*.corrupt-*"))


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("alpha", -1),
        ("alpha", float("inf")),
        ("alpha", float("nan")),
        ("latency_budget_s", 0),
        ("latency_budget_s", float("inf")),
        ("memory_budget_bytes", -1),
        ("request_latency_budget_s", -5.0),
        ("budget_scale", 0),
        ("ridge_lambda", 0),
        ("beta_threshold", 1.5),
    ],
)
def test_invalid_alpha_or_budgets_are_rejected_at_load_naming_the_key(key: str, value: float) -> None:
    with pytest.raises(ConfigError, match=rf"policy\.{key}"):
        load_settings(policy={key: value})


def test_invalid_policy_settings_in_a_file_name_the_key(tmp_path: Path) -> None:
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("policy:\n  alpha: -1\n")
    with pytest.raises(ConfigError, match=r"policy\.alpha") as e:
        load_settings(cfg)
    assert "greater than or equal to 0" in str(e.value)


# --- `ragmend policy ...` and `ragmend bench policy` ----------------------------------------------


def policy_cli(tmp_path: Path, *args: str, input: str | None = None):
    from typer.testing import CliRunner

    from ragmend.cli.main import app

    return CliRunner().invoke(app, ["--data-dir", str(tmp_path), "policy", *args], input=input)


def flat(output: str) -> str:
    """The CLI's output with rich's line wrapping undone (it wraps at spaces)."""
    return " ".join(output.split())


def test_policy_cli_export_reset_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGMEND_POLICY__CONTEXT_DIM", "0")
    nothing = policy_cli(tmp_path, "export")
    assert nothing.exit_code == 2 and "no policy state" in flat(nothing.output)
    assert not (tmp_path / "policy.sqlite").exists()  # a read-only command created nothing
    pol = open_policy(load_settings(data_dir=tmp_path))
    for i in range(12):
        pol.update(ARMS[i % 3], signature_x(pol.builder, i), (i % 4) / 3)
    learned = pol.export_state()
    pol.close()

    shown = policy_cli(tmp_path, "export")
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout) == learned
    out = tmp_path / "exported" / "state.json"
    written = policy_cli(tmp_path, "export", "--out", str(out))
    assert written.exit_code == 0 and json.loads(out.read_text()) == learned

    kept = policy_cli(tmp_path, "reset", input="n\n")
    assert kept.exit_code == 1 and "nothing changed" in flat(kept.output)
    reset = policy_cli(tmp_path, "reset", "--yes")
    assert reset.exit_code == 0, reset.output
    assert json.loads(reset.stdout) == {
        "state_path": str(tmp_path / "policy.sqlite"),
        "reset": True,
        "forgotten_pulls": 12,
    }
    assert json.loads(policy_cli(tmp_path, "export").stdout)["arms"] == {}

    imported = policy_cli(tmp_path, "import", str(out))
    assert imported.exit_code == 0, imported.output
    assert json.loads(imported.stdout)["total_pulls"] == 12
    assert json.loads(policy_cli(tmp_path, "export").stdout) == learned


def test_policy_cli_works_on_the_routers_state_with_router(tmp_path: Path) -> None:
    """--router: the same commands over the router's own state (router.sqlite), the repair
    policy's untouched."""
    from ragmend.engine.router import Router

    nothing = policy_cli(tmp_path, "export", "--router")
    assert nothing.exit_code == 2 and "router.sqlite" in flat(nothing.output)
    router = Router(load_settings(data_dir=tmp_path), lambda texts: np.ones((len(texts), 384)))
    router.policy.update("large_hybrid", np.full(router.policy.dim, 0.1), 0.6)
    learned = router.policy.export_state()
    router.close()
    shown = policy_cli(tmp_path, "export", "--router")
    assert shown.exit_code == 0 and json.loads(shown.stdout) == learned
    assert not (tmp_path / "policy.sqlite").exists()
    reset = policy_cli(tmp_path, "reset", "--router", "--yes")
    assert json.loads(reset.stdout) == {
        "state_path": str(tmp_path / "router.sqlite"),
        "reset": True,
        "forgotten_pulls": 1,
    }
    out = tmp_path / "router.json"
    out.write_text(json.dumps(learned))
    imported = policy_cli(tmp_path, "import", "--router", str(out))
    assert imported.exit_code == 0 and json.loads(imported.stdout)["pulls"]["large_hybrid"] == 1


def test_policy_cli_refuses_a_bad_import_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGMEND_POLICY__CONTEXT_DIM", "0")
    pol = open_policy(load_settings(data_dir=tmp_path))
    pol.update("rerank", signature_x(pol.builder, 1), 0.75)
    good = pol.export_state()
    pol.close()
    other_layout = tmp_path / "other-layout.json"
    other_layout.write_text(json.dumps({**good, "dim": 35}))
    not_json = tmp_path / "notes.json"
    not_json.write_text("{ this is not JSON")
    cases = [
        (tmp_path / "missing.json", "not found"),
        (not_json, "is not a JSON policy export"),
        (other_layout, "35 context features"),
    ]
    for file, phrase in cases:
        result = policy_cli(tmp_path, "import", str(file))
        assert result.exit_code == 2, result.output
        assert str(file) in flat(result.output) and phrase in flat(result.output), result.output
    assert "the state is unchanged" in flat(result.output)  # the last one: found, read, refused
    assert json.loads(policy_cli(tmp_path, "export").stdout) == good  # unchanged


def test_policy_cli_on_a_corrupt_state_file(tmp_path: Path) -> None:
    (tmp_path / "policy.sqlite").write_bytes(b"\x00garbage" * 100)
    result = policy_cli(tmp_path, "export")
    assert result.exit_code == 2 and "was refused" in flat(result.output)
    assert len(list(tmp_path.glob("policy.sqlite.corrupt-*"))) == 1


def test_policy_commands_have_help_with_an_example() -> None:
    from typer.testing import CliRunner

    from ragmend.cli.main import app

    for command in (["policy"], ["policy", "export"], ["policy", "import"], ["policy", "reset"]):
        result = CliRunner().invoke(app, [*command, "--help"])
        assert result.exit_code == 0 and "Example" in result.output, command
    result = CliRunner().invoke(app, ["bench", "policy", "--help"])
    assert result.exit_code == 0 and "Example" in result.output


def test_bench_policy_json_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    # The command's plumbing and its JSON, not timings (those are the benchmark's business): the
    # reference size is shrunk, since every inverse at d = 786 costs 0.1-0.2 s on this machine.
    import ragmend.bench.speed.policy as policy_bench
    from ragmend.cli.main import app

    monkeypatch.setattr(policy_bench, "REFERENCE", (48, 11))
    args = ["bench", "policy", "--json", "--steps", "5", "--steps-d786", "3", "--inverse-steps", "3"]
    result = CliRunner().invoke(app, [*args, "--store-steps", "10", "--workdir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    for key in ("us_per_step_d64", "us_per_step_d786", "us_per_step_d786_inverse", "speedup_d786"):
        assert isinstance(report[key], float) and report[key] > 0
    assert report["runs"]["d786_inverse"]["implementation"] == "inverse_per_select"
    assert (report["runs"]["d64"]["dim"], report["runs"]["d64"]["arms"]) == (64, 6)
    assert (report["runs"]["d786"]["dim"], report["runs"]["d786"]["arms"]) == (48, 11)
    # The baseline decided exactly as LinUCB did on the same data.
    assert report["same_choices_d786"] == {"steps": 4, "fraction": 1.0}
    assert [(s["store"], s["dim"], s["steps"]) for s in report["stores"]] == [
        ("memory", 64, 10),
        ("sqlite", 64, 10),
        ("memory", 48, 1),
        ("sqlite", 48, 1),
    ]
    assert not list(tmp_path.iterdir())  # its SQLite files were cleaned up


def test_host_rss_growth_is_held_to_its_own_budget() -> None:
    pol = Policy.in_memory(ACTION_NAMES, PolicySettings(budget_scale=1.5))
    assert pol.budgets_for("nvml").memory_bytes == 6 * MB * 1.5
    assert pol.budgets_for("rss").memory_bytes == 64 * MB * 1.5
    after = diagnosis("NoFailure", e_r="entail", kappa="consistent")
    # 10 MB of growth: over the (scaled) GPU budget of 9 MB, well within the host one.
    assert pol.reward(after, 1.0, 10 * MB, "nvml").violated == ("memory",)
    rss = pol.reward(after, 1.0, 10 * MB, "rss")
    assert rss.violated == () and rss.total > 0


# --- every catalogue arm, enabled_actions as a mask, runtime changes ----------------------------


def test_the_policy_holds_every_catalogue_arm_whatever_is_enabled(tmp_path: Path) -> None:
    from ragmend.actions.catalogue import ACTIONS

    pol = Policy(
        small_config(enabled_actions=("rerank", "depth")), SQLiteStore(tmp_path / "p.sqlite"), ACTION_NAMES
    )
    assert pol.arms == tuple(a.name for a in ACTIONS) and pol.enabled_actions == ("rerank", "depth")
    assert set(pol.stats()) == set(pol.arms)
    x = signature_x(pol.builder, 1)
    pol.update("mode_switch", x, 1.0)  # a disabled arm may still learn (a pull that was in flight)
    pol.close()
    # Reopened with another enabled set: the state is the same state, not refused or set aside.
    again = Policy(
        small_config(enabled_actions=("mode_switch",)), SQLiteStore(tmp_path / "p.sqlite"), ACTION_NAMES
    )
    assert again.stats()["mode_switch"].pulls == 1 and not list(tmp_path.glob("*.corrupt-*"))
    with pytest.raises(ConfigError, match=r"policy\.enabled_actions: unknown action"):
        Policy(small_config(enabled_actions=("rerank", "teleport")), MemoryStore(), ACTION_NAMES)


def test_a_disabled_action_is_never_selected_and_keeps_its_statistics(tmp_path: Path) -> None:
    pol = Policy(small_config(alpha=0.0), SQLiteStore(tmp_path / "p.sqlite"), ACTION_NAMES)
    xs = [signature_x(pol.builder, i) for i in range(40)]
    for x in xs:
        pol.update("rerank", x, 1.0)  # by far the best arm ...
        pol.update("depth", x, 0.1)
    assert {pol.select(x, ARMS).arm for x in xs} == {"rerank"}
    kept = pol.export_state()
    pol.configure(enabled_actions=[a for a in ARMS if a != "rerank"])  # ... and disabled
    for x in xs:
        d = pol.select(x, ARMS)  # the caller's list still holds it: masked here too
        assert d.arm != "rerank" and "rerank" in d.masked and "rerank" not in d.scores
    assert pol.stats()["rerank"].pulls == 40 and pol.export_state() == kept
    with pytest.raises(ArmsDisabled):
        pol.select(xs[0], ["rerank"])
    pol.configure(enabled_actions=ARMS)  # enabled again: what it learned is still there
    assert {pol.select(x, ARMS).arm for x in xs} == {"rerank"}
    for bad, message in [
        ([], "at least one"),
        (["rerank", "rerank"], "repeat"),
        (["teleport"], "unknown action"),
        ("rerank", r"policy\.enabled_actions: Input should be a valid tuple"),
    ]:
        with pytest.raises(InputError, match=message):
            pol.configure(enabled_actions=bad)
    assert pol.enabled_actions == ARMS


def test_switching_kind_keeps_the_learned_state(tmp_path: Path) -> None:
    pol = Policy(small_config(alpha=0.3), SQLiteStore(tmp_path / "p.sqlite"), ACTION_NAMES)
    for i in range(30):
        pol.update(ARMS[i % 3], signature_x(pol.builder, i), (i % 5) / 4)
    before = pol.export_state()
    theta = {a: pol.coefficients(a) for a in ARMS[:3]}
    pol.configure(kind="lints")  # same ridge sums: the same coefficients
    assert pol.kind == "lints" and pol.alpha is None
    assert all(pol.coefficients(a) == pytest.approx(theta[a]) for a in ARMS[:3])
    pol.configure(kind="beta_ts")  # the stored counts
    s = pol.stats()[ARMS[0]]
    assert pol.bandit.posterior(ARMS[0]) == (1 + s.successes, 1 + s.failures)  # type: ignore[attr-defined]
    assert pol.select(signature_x(pol.builder, 3), ARMS).kind == "beta_ts"
    pol.configure(kind="linucb")  # back, with the alpha in force before
    assert pol.alpha == 0.3
    assert all(pol.coefficients(a) == pytest.approx(theta[a]) for a in ARMS[:3])
    assert pol.export_state()["arms"] == before["arms"]  # the store never changed
    pol.update(ARMS[0], signature_x(pol.builder, 99), 1.0)  # and learning goes on from it
    assert pol.stats()[ARMS[0]].pulls == 11
    with pytest.raises(InputError, match=r"policy\.kind"):
        pol.configure(kind="eps_greedy")


def test_budgets_change_at_runtime_and_take_effect_at_once() -> None:
    pol = Policy.in_memory(ACTION_NAMES, small_config())
    after = diagnosis("NoFailure", e_r="entail", kappa="consistent")
    assert pol.reward(after, 9.0, MB).violated == ()
    pol.configure(latency_budget_s=10.0, budget_scale=0.7)  # Stringent
    assert pol.budgets_for().latency_s == pytest.approx(7.0)
    assert pol.budgets_for("rss").memory_bytes == pytest.approx(64 * MB * 0.7)
    assert pol.reward(after, 9.0, MB).violated == ("latency",)
    # The context's budget fractions follow (as a restart with these values would build them).
    pol.configure(request_latency_budget_s=20.0)
    x = pol.context(None, diagnosis(), latency_left_s=5.0, memory_left_bytes=0.7 * 3 * MB)
    names = pol.builder.feature_names()
    assert x[names.index("latency_left")] == pytest.approx(0.25)
    assert x[names.index("memory_left")] == pytest.approx(0.5)
    # All or nothing, the key named.
    with pytest.raises(InputError, match=r"policy\.budget_scale"):
        pol.configure(alpha=0.1, budget_scale=0)
    assert pol.alpha == 2.0 and pol.config.budget_scale == 0.7
    with pytest.raises(InputError, match="restart"):
        pol.configure(context_dim=4)
    assert pol.configure(latency_budget_s=10.0) == ()  # unchanged: nothing to do


def test_runtime_changes_are_safe_beside_requests(tmp_path: Path) -> None:
    pol = Policy(small_config(), SQLiteStore(tmp_path / "p.sqlite", synchronous="NORMAL"), ACTION_NAMES)
    errors: list[BaseException] = []
    done = threading.Event()

    def worker(k: int) -> None:
        try:
            for i in range(30):
                x = signature_x(pol.builder, k * 100 + i)
                d = pol.select(x, ARMS)
                assert d.arm in ARMS
                pol.update(d.arm, x, (i % 4) / 3)
        except BaseException as e:
            errors.append(e)

    def admin() -> None:
        kinds, subsets = ("lints", "beta_ts", "linucb"), (ARMS[:2], ARMS[2:], ARMS)
        i = 0
        while not done.is_set():
            pol.configure(kind=kinds[i % 3], enabled_actions=subsets[i % 3], budget_scale=1 + i % 2)
            i += 1

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(3)]
    changer = threading.Thread(target=admin)
    changer.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done.set()
    changer.join()
    assert not errors
    assert sum(s.pulls for s in pol.stats().values()) == 90
