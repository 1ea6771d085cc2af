"""The online repair loop end to end with the real models (tiny generator): a failed answer gets
one budgeted action chosen by the policy, a measured second pass, a reward, a persisted update,
and the better-supported answer; budgets and frozen mode hold."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from ragmend.engine import Engine
from ragmend.engine.engine import open_policy
from ragmend.engine.outcome import Outcome
from ragmend.engine.repair import RepairSkip, RepairTrace, offered_actions, support_rank
from ragmend.models.registry import ModelRegistry
from ragmend.settings import Settings, settings_with
from tests.conftest import LiveServer, sample_questions, tiny_settings

# Nothing in the test corpus answers this: the evidence is insufficient (IE) in any diagnosis.
UNANSWERABLE = "What is the name of the dragon that lives under the royal castle of Wawel?"


def repair_settings(
    tmp: Path, base: Engine, replace_threshold: float | None = None, **policy: object
) -> Settings:
    """The session engine's settings with their own policy state and wide budgets. The repair is
    what these tests follow: the first pass is the configured one (the router off) on the one
    generator, with no stronger one to escalate to (tests/test_router.py and
    tests/test_remote_generator.py cover those), and every failure is sure enough to repair
    (`replace_threshold`: null) unless a test sets how sure it must be."""
    return settings_with(
        base.settings,
        models={"escalation": None},
        router={"enabled": False},
        diagnosis={"replace_threshold": replace_threshold},
        # Budgets wide enough for two CPU generations on a loaded test machine.
        policy={
            "latency_budget_s": 120.0,
            "request_latency_budget_s": 600.0,
            "seed": 1,
            "state_path": str(tmp / "policy.sqlite"),
        }
        | policy,
    )


def make_engine(tmp: Path, base: Engine, replace_threshold: float | None = None, **policy: object) -> Engine:
    """An engine over the session engine's index and models, with its own policy state."""
    settings = repair_settings(tmp, base, replace_threshold, **policy)
    eng = Engine(settings, models=ModelRegistry.sharing(base.models, settings))
    eng.load(build_index=False)
    return eng


@pytest.fixture(scope="module")
def repair_engine(tmp_path_factory: pytest.TempPathFactory, engine: Engine) -> Engine:
    return make_engine(tmp_path_factory.mktemp("repair"), engine)


def test_a_failed_answer_is_repaired_once_and_the_policy_learns(repair_engine: Engine) -> None:
    outcome = repair_engine.respond(UNANSWERABLE)
    first = outcome.first_diagnosis
    assert first is not None and first.failed
    trace = outcome.repair
    assert isinstance(trace, RepairTrace), trace
    assert (
        trace.action == trace.decision.arm and trace.action in repair_engine.settings.policy.enabled_actions
    )
    # Nothing answers the question, so the failure is the evidence's, and the trace repairs it.
    assert first.failure == "IE" and trace.failure == first.failure
    # The chosen action served the failure; masked actions say why.
    assert all(m.reason for m in trace.masked)
    # Measured cost: monotonic latency, and memory from NVML or the labelled RSS fallback.
    assert trace.cost.latency_s > 0
    assert trace.cost.memory_source in ("nvml", "rss")
    if trace.cost.memory_source == "rss":
        assert trace.cost.nvml.startswith("unavailable")
    # The reward is Eq. 2 on the second pass's diagnosis and the measured cost.
    again = repair_engine.repairer.policy.reward(
        trace.diagnosis, trace.cost.latency_s, trace.cost.memory_bytes, trace.cost.memory_source
    )
    if trace.cost.memory_source == "rss":  # host memory is held to its own budget
        assert trace.reward.budgets.memory_bytes == repair_engine.settings.policy.rss_memory_budget_bytes
    assert again.total == pytest.approx(trace.reward.total)
    assert trace.learned
    # The reply carries the better-supported answer.
    assert trace.diagnosis is not None and outcome.diagnosis is not None
    best = max((first, trace.diagnosis), key=support_rank)
    assert support_rank(outcome.diagnosis) == support_rank(best)
    assert trace.kept == ("repaired" if outcome.answer is trace.answer else "original")
    # The usage is the whole request's: both passes (and a rewrite's call), whichever answer won.
    assert outcome.usage["answer"].calls == 1 and outcome.usage["repair"].calls == 1
    assert outcome.usage["answer"].completion_tokens == first_answer_tokens(outcome)
    assert outcome.usage["repair"].completion_tokens == trace.answer.completion_tokens
    assert ("rewrite" in outcome.usage) == trace.action.startswith("rewrite")
    total = outcome.total_usage()
    assert total.prompt_tokens == sum(t.prompt_tokens for t in outcome.usage.values())
    assert total.prompt_tokens > outcome.answer.prompt_tokens
    # The update is persisted: a fresh policy over the same state file sees the pull.
    fresh = open_policy(repair_engine.settings)
    try:
        assert fresh.stats()[trace.action].pulls == 1
    finally:
        fresh.close()


def first_answer_tokens(outcome: Outcome) -> int:
    assert outcome.first is not None
    return outcome.first.completion_tokens


def test_request_budget_spent_means_no_repair(tmp_path: Path, engine: Engine) -> None:
    eng = make_engine(tmp_path, engine, request_latency_budget_s=0.01)
    outcome = eng.respond(UNANSWERABLE)
    assert isinstance(outcome.repair, RepairSkip) and "request budget spent" in outcome.repair.reason
    # The failed first answer is the reply, with its own diagnosis: no repair pass ran, nothing
    # was generated for one and the policy learned nothing.
    assert outcome.first is not None and outcome.answer is outcome.first
    assert outcome.first_diagnosis is not None and outcome.first_diagnosis.failed
    assert outcome.diagnosis is outcome.first_diagnosis
    assert "repair" not in outcome.usage
    assert all(arm.pulls == 0 for arm in eng.repairer.policy.stats().values())
    eng.close()


def test_frozen_policy_repairs_without_learning(tmp_path: Path, engine: Engine) -> None:
    eng = make_engine(tmp_path, engine, learn=False, enabled_actions=("mode_switch",))
    trace = eng.respond(UNANSWERABLE).repair
    assert isinstance(trace, RepairTrace) and trace.action == "mode_switch" and not trace.learned
    assert trace.config.mode == "bm25"
    assert eng.repairer.policy.stats()["mode_switch"].pulls == 0
    eng.close()


def test_http_answer_carries_the_repair_trace(repair_engine: Engine) -> None:
    from ragmend.server.app import create_app

    with LiveServer(create_app(repair_engine.settings, engine=repair_engine)) as server:
        r = httpx.post(
            server.url + "/v1/answer", json={"query": UNANSWERABLE, "config": {"k": 3}}, timeout=600
        )
    assert r.status_code == 200, r.text
    body = r.json()
    rep = body["repair"]
    # Nothing answers the question: the first pass lacked the evidence, and that is what was repaired.
    assert body["first_diagnosis"]["failure"] == "IE" and rep["failure"] == "IE"
    assert rep["action"] in repair_engine.settings.policy.enabled_actions
    assert set(rep["decision"]["scores"]) >= {rep["action"]}
    assert rep["cost"]["memory_source"] in ("nvml", "rss") and rep["reward"]["variant"] == "paper"
    assert body["seconds"] >= rep["cost"]["latency_s"]


def test_an_uncertain_failure_keeps_the_answer_marked_and_runs_no_repair(
    tmp_path: Path, engine: Engine
) -> None:
    """Over HTTP: with the replace point above any score the verdict gives, a failed answer to a
    question the sources answer is uncertain; it is what the user reads, each unsupported
    sentence marked, with how sure the check is. The abstain action, which would replace it, is
    not offered. Sources that do not answer the question are graded the same way (the
    answerability model can be wrong too): unsure, the answer stays, marked."""
    from ragmend.engine.presentation import UNSUPPORTED_MARK, UNSURE
    from ragmend.server.app import create_app

    answerable = sample_questions()[0]["question"]
    eng = make_engine(tmp_path, engine, replace_threshold=1.0, enabled_actions=("abstain", "no_repair"))
    with LiveServer(create_app(eng.settings, engine=eng)) as server:
        r = httpx.post(server.url + "/v1/answer", json={"query": answerable}, timeout=600)
        unanswered = httpx.post(server.url + "/v1/answer", json={"query": UNANSWERABLE}, timeout=600)
    eng.close()
    assert r.status_code == 200 and unanswered.status_code == 200, (r.text, unanswered.text)
    other = unanswered.json()
    assert other["diagnosis"]["failure"] == "IE" and other["diagnosis"]["grade"] == "uncertain"
    assert other["abstained_by"] is None and other["answer_policy"] == "marked"
    body = r.json()
    d = body["diagnosis"]
    assert d["failure"] == "WR" and d["grade"] == "uncertain", (d["decided_by"], body["generated"])
    rep = body["repair"]
    assert rep["kept"] == "original" and rep["action"] != "abstain"
    assert {
        "name": "abstain",
        "reason": "the failure is uncertain: an abstention would replace the answer",
    } in rep["masked"]
    assert body["answer_policy"] == "marked" and body["abstained_by"] is None
    p = round(100 * d["verdict"]["p_unsupported"])
    assert body["answer_note"] == f"{UNSURE} (it puts the chance that it is unsupported at {p}%)."
    assert body["answer"].startswith(body["generated"].split(".")[0]) and body["answer"].endswith(
        body["answer_note"]
    )
    unsupported = [c for c in body["citations"] if c["supported"] is False]
    assert unsupported and all(f"{c['text']} {UNSUPPORTED_MARK}" in body["answer"] for c in unsupported)


def test_an_i_dont_know_the_sources_answer_is_a_miss_and_not_read_as_sources_that_do_not(
    engine: Engine,
) -> None:
    """With the real models: "I don't know." to a question its passages answer is a miss (WR,
    uncertain), so no abstention is offered in its place, and the user reads the generator's words
    and the passages that may answer, not that the sources do not answer. To passages that do not
    answer, it is the honest abstention it says it is."""
    from ragmend.engine.presentation import ABSTENTION_TEXT, MISSED, Reading, present
    from ragmend.rag.types import Passage, RAGConfig

    question = "Andrew Jaspan was the co-founder of what not-for-profit media outlet?"
    answering = (
        "Andrew Jaspan is a British-Australian journalist and editor, the co-founder of The Conversation.",
        "The Conversation is a not-for-profit media outlet that publishes articles by academics.",
    )
    unrelated = (
        "Wawel Castle stands on a limestone hill in Krakow.",
        "The Vistula is Poland's longest river.",
    )

    def passages(texts: tuple[str, ...]) -> tuple[Passage, ...]:
        return tuple(
            Passage(id=f"p{i}", doc_id=f"p{i}", title=f"T{i}", text=t, score=0.0, retriever="given")
            for i, t in enumerate(texts, start=1)
        )

    said = "I don't know."
    given = passages(answering)
    missed = engine.diagnoser.diagnose(question, given, said)
    assert (missed.failure, missed.decided_by, missed.grade) == ("WR", "missed_answer", "uncertain")
    offered, masked = offered_actions(engine.settings.policy, RAGConfig(), missed)
    assert "abstain" not in offered and any(m.name == "abstain" for m in masked)
    shown = present(said, missed, [(p.id, p.title) for p in given], Reading(), query=question)
    assert shown.text == f"{said} {MISSED} What was found: [1] T1, [2] T2." and shown.abstained_by is None
    assert ABSTENTION_TEXT not in shown.text
    other = passages(unrelated)
    honest = engine.diagnoser.diagnose(question, other, said)
    assert (honest.failure, honest.decided_by, honest.grade) == ("IE", "abstained", "confident")
    read = present(said, honest, [(p.id, p.title) for p in other], Reading(), query=question)
    assert read.text.startswith(ABSTENTION_TEXT) and read.abstained_by == "answer_policy"


def test_unknown_action_in_config_is_a_clear_error(tmp_path: Path) -> None:
    from ragmend.errors import ConfigError

    with pytest.raises(ConfigError, match=r"policy\.enabled_actions: unknown action"):
        Engine(tiny_settings(tmp_path, policy={"enabled_actions": ("rerank", "teleport")}))


def test_the_abstain_action_answers_that_the_sources_do_not_and_says_who_spoke(
    tmp_path: Path, engine: Engine
) -> None:
    from ragmend.engine.presentation import ABSTENTION_TEXT
    from ragmend.server.app import create_app

    eng = make_engine(tmp_path, engine, enabled_actions=("abstain",))
    with LiveServer(create_app(eng.settings, engine=eng)) as server:
        r = httpx.post(server.url + "/v1/answer", json={"query": UNANSWERABLE}, timeout=600)
    assert r.status_code == 200, r.text
    body = r.json()
    rep = body["repair"]
    assert rep["action"] == "abstain" and rep["kept"] == "abstained"
    # One voice: the abstention, with what was found, and no note from the answer policy on top.
    assert body["answer"].startswith(ABSTENTION_TEXT) and "What was found: [1]" in body["answer"]
    assert body["abstained_by"] == "repair" and body["answer_note"] is None
    # No generator call beyond the first answer; the reward is the probability that the sources
    # do not answer, which for this question is high.
    assert body["usage"]["by_purpose"].keys() == {"answer"}
    support = body["first_diagnosis"]["e_q"]["support"]
    assert rep["reward"]["quality"] == pytest.approx(1 - support) and rep["reward"]["quality"] > 0.5
    assert eng.repairer.policy.stats()["abstain"].pulls == 1
    eng.close()


def test_no_repair_keeps_the_first_answer_and_learns_what_it_is_worth(tmp_path: Path, engine: Engine) -> None:
    eng = make_engine(tmp_path, engine, enabled_actions=("no_repair",))
    outcome = eng.respond(UNANSWERABLE)
    trace = outcome.repair
    assert isinstance(trace, RepairTrace) and trace.action == "no_repair" and trace.kept == "original"
    assert outcome.answer is outcome.first and "repair" not in outcome.usage
    # Its reward is Eq. 2 of the failed answer it kept, at no pass's cost.
    assert outcome.first_diagnosis is not None
    kept = eng.repairer.policy.reward(outcome.first_diagnosis, 0.0, None)
    assert trace.reward.quality == kept.quality < 1 and trace.learned
    eng.close()


def test_one_more_repair_when_the_first_still_fails_never_a_loop(tmp_path: Path, engine: Engine) -> None:
    eng = make_engine(tmp_path, engine, extra_repairs=1, enabled_actions=("mode_switch", "depth"))
    outcome = eng.respond(UNANSWERABLE)
    first, second = outcome.repair, outcome.second_repair
    assert isinstance(first, RepairTrace) and first.diagnosis.failed
    # The second offers only what was not tried, from the better answer so far; two at most.
    assert isinstance(second, RepairTrace), second
    assert {first.action, second.action} == {"mode_switch", "depth"}
    assert outcome.usage["repair"].calls == 2
    assert sum(arm.pulls for arm in eng.repairer.policy.stats().values()) == 2
    eng.close()
    # Off by default: one repair.
    assert Settings().policy.extra_repairs == 0


def test_an_answer_of_the_stronger_generator_is_kept_and_the_trace_says_why(
    tmp_path: Path, engine: Engine
) -> None:
    """A first pass on the stronger generator (a router plan) is not repaired by default: the
    repair offers policy.after_escalation_actions (no_repair) and says why the rest are out."""
    settings = settings_with(
        repair_settings(tmp_path, engine),
        models={"escalation": engine.settings.models.escalation},
        router={"enabled": True, "plans": ["large_hybrid"], "state_path": str(tmp_path / "router.sqlite")},
    )
    eng = Engine(settings, models=ModelRegistry.sharing(engine.models, settings))
    eng.load(build_index=False)
    try:
        outcome = eng.respond(UNANSWERABLE)
        assert outcome.first is not None and outcome.first.config.generator == "escalation"
        trace = outcome.repair
        assert isinstance(trace, RepairTrace) and trace.action == "no_repair" and trace.kept == "original"
        narrowed = {m.name for m in trace.masked if "policy.after_escalation_actions" in m.reason}
        no_conflict = {m.name for m in trace.masked if m.reason.startswith("the evidence holds no conflict")}
        assert no_conflict == {"present_conflict"}  # offered only where the evidence disagrees
        assert narrowed == set(settings.policy.enabled_actions) - {"no_repair", "present_conflict"}
        assert "repair" not in outcome.usage  # no generator call after the first pass
    finally:
        eng.close()
    # null offers every enabled action again; a default generator's answer is never narrowed.
    wide = settings_with(settings, policy={"after_escalation_actions": None}).policy
    first = outcome.first_diagnosis
    assert first is not None and first.conflict is None
    every = [a for a in wide.enabled_actions if a != "present_conflict"]
    offered, masked = offered_actions(wide, outcome.first.config, first)
    assert offered == every and [m.name for m in masked] == ["present_conflict"]
    default_answer = outcome.first.config.patch(generator="default")
    assert offered_actions(settings.policy, default_answer, first)[0] == every
    from ragmend.errors import ConfigError

    with pytest.raises(ConfigError, match=r"policy\.after_escalation_actions: unknown action"):
        Engine(settings_with(settings, policy={"after_escalation_actions": ["abstain", "teleport"]}))
