"""A router state learned under the fine question kinds is read under the pooled layout exactly,
as is one learned before the evidence features under a layout with them, in each store the server
opens (SQLite, a real PostgreSQL), and a state of any other layout is still refused."""

from __future__ import annotations

import doctest
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from ragmend.diagnosis.question_form import question_form
from ragmend.errors import ConfigError
from ragmend.policy import MemoryStore, Policy, PolicyStore, SQLiteStore, layout
from ragmend.policy.plan_context import PlanContextBuilder
from ragmend.settings import PolicySettings

PLANS = ("default_hybrid", "large_hybrid")
QUESTIONS = (
    ("Who wrote Hamlet?", False),
    ("Which river is longer, the Nile or the Amazon?", False),
    ("When did the war end?", False),
    ("Paris is the capital of France.", True),
    ("Is the Eiffel Tower in Paris?", False),
)


def test_the_pooling_rule_in_its_docstring_holds() -> None:
    assert doctest.testmod(layout).failed == 0


def learn(policy: Policy[PlanContextBuilder], builder: PlanContextBuilder) -> None:
    rng = np.random.default_rng(0)
    for n in range(40):
        query, claim = QUESTIONS[n % len(QUESTIONS)]
        x = builder.build(rng.standard_normal(384), question_form(query, claim=claim), False, 20.0)
        # The same draws for both layouts: the embedding draw first, then the reward draw.
        policy.update(PLANS[n % 2], x, float(rng.uniform()))


@pytest.fixture(params=["sqlite", "postgres"])
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], PolicyStore]:
    """Opens the same stored state again each call."""
    if request.param == "sqlite":
        return lambda: SQLiteStore(tmp_path / "router.sqlite")
    from ragmend.policy.pgstore import PostgresStore

    dsn = request.getfixturevalue("dsn")
    return lambda: PostgresStore(dsn, "t/router")


def test_a_fine_kind_state_is_read_under_the_pooled_layout_with_every_update_kept(
    open_store: Callable[[], PolicyStore],
) -> None:
    cfg = PolicySettings.model_validate({"kind": "linucb", "enabled_actions": list(PLANS)})
    fine, pooled = PlanContextBuilder(4, kinds="fine"), PlanContextBuilder(4)
    old = Policy(cfg, open_store(), PLANS, builder=fine)
    learn(old, fine)
    old.close()

    upgraded = Policy(cfg, open_store(), PLANS, builder=pooled)
    direct = Policy(cfg, MemoryStore(), PLANS, builder=pooled)
    learn(direct, pooled)
    got, want = upgraded.store.export_state(), direct.store.export_state()
    assert got.feature_names == pooled.feature_names() and got.total_pulls == 40
    for plan in PLANS:
        assert np.allclose(got.arm(plan).xtx, want.arm(plan).xtx)
        assert np.allclose(got.arm(plan).xty, want.arm(plan).xty)
    x = pooled.build(np.ones(384), question_form("Who painted it?"), False, 20.0)
    assert upgraded.select(x, PLANS).scores == pytest.approx(direct.select(x, PLANS).scores, rel=1e-12)
    upgraded.close()
    # Read again: the store now holds the pooled layout, no second rewrite.
    again = open_store()
    assert not layout.upgrade_layout(again, pooled.feature_names(), pooled.pooled_from())
    again.close()


def test_a_state_learned_before_the_evidence_features_is_read_with_them_as_zero(
    open_store: Callable[[], PolicyStore],
) -> None:
    """Before the router read the evidence, nothing was read: both features were 0 in every
    context it learned from, so the state maps exactly and decides as before where nothing is
    read, while a reading now moves the scores."""
    cfg = PolicySettings.model_validate({"kind": "linucb", "enabled_actions": list(PLANS)})
    before, with_evidence = PlanContextBuilder(4), PlanContextBuilder(4, evidence=True)
    old = Policy(cfg, open_store(), PLANS, builder=before)
    learn(old, before)
    form = question_form("Who painted it?")
    unread = before.build(np.ones(384), form, False, 20.0)
    scores_before = old.select(unread, PLANS).scores
    old.close()

    upgraded = Policy(cfg, open_store(), PLANS, builder=with_evidence)
    state = upgraded.store.export_state()
    assert state.feature_names == with_evidence.feature_names() and state.total_pulls == 40
    x = with_evidence.build(np.ones(384), form, False, 20.0, p_answerable=None)
    names = with_evidence.feature_names()
    assert x[names.index("evidence_read")] == 0.0 and x[names.index("answerable")] == 0.0
    assert upgraded.select(x, PLANS).scores == pytest.approx(scores_before, rel=1e-9)
    read = with_evidence.build(np.ones(384), form, False, 20.0, p_answerable=0.9)
    assert read[names.index("evidence_read")] == 1.0 and read[names.index("answerable")] == 0.9
    assert upgraded.select(read, PLANS).scores != pytest.approx(scores_before, rel=1e-9)
    upgraded.close()
    # A state learned with them cannot be read without them: that would drop what it learned.
    with pytest.raises(ConfigError, match="learned with 13 context features"):
        Policy(cfg, open_store(), PLANS, builder=before)


def test_a_state_of_another_layout_is_still_refused_and_kept(tmp_path: Path) -> None:
    cfg = PolicySettings.model_validate({"kind": "linucb", "enabled_actions": list(PLANS)})
    path = tmp_path / "router.sqlite"
    old = Policy(cfg, SQLiteStore(path), PLANS, builder=PlanContextBuilder(8, kinds="fine"))
    learn(old, PlanContextBuilder(8, kinds="fine"))
    old.close()
    with pytest.raises(ConfigError, match="was refused"):
        Policy(cfg, SQLiteStore(path), PLANS, builder=PlanContextBuilder(4))
    assert list(tmp_path.glob("router.sqlite.corrupt-*"))
