"""When the sources disagree: the diagnosis finds incompatible answers to the asked fact (and not
passages that merely differ), says which passages hold which, does not report a one-sided answer
as supported, and the user reads both sides. Real models (NLI, cross-encoder), real HTTP."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from ragmend.engine import Engine
from ragmend.engine.presentation import DISAGREE, Reading, present
from ragmend.models.registry import ModelRegistry
from ragmend.rag.types import Passage, RAGConfig
from ragmend.server.openai_api import tail
from tests.conftest import LiveServer, tiny_settings

ACQUIRED = "Which company acquired Quenton Ltd?"
DISAGREE_ON_IT = [
    "Quenton Ltd, a maker of ship engines, was acquired by Halvard Group in 2015.",
    "In 2015 Quenton Ltd was bought by Morrow Holdings, which still owns it.",
    "Quenton Ltd was founded in Leeds in 1921 and makes ship engines.",  # differs, on another fact
]
# The same conflict in plain sentences, which the tiny test generator restates as its answer.
DISAGREE_PLAINLY = [
    "Quenton Ltd was acquired by Halvard Group in 2015.",
    "Quenton Ltd was acquired by Morrow Holdings in 2015.",
    "Quenton Ltd was founded in Leeds in 1921 and makes ship engines.",
]
BORN = "Where was Marie Curie born?"
ONLY_DIFFER = [
    "Marie Curie was born in Warsaw in 1867.",
    "Marie Curie moved to Paris in 1891 to study physics.",
    "Marie Curie died in Passy, France, in 1934.",  # the NLI model reads it as contradicting
]

NUC = "How do I install a nuc of bees?"
# Two passages of one procedure, which the answer follows step by step: the NLI model reads the
# second passage's "Move the frames ..." as contradicting the first's "move the nuc to the side".
ONE_PROCEDURE = [
    "Place the nuc in its permanent location and remove the block from its entrance. Wait 24 hours for "
    "the bees to orient. Then move the nuc to the side and put the empty hive box in its place.",
    "Move the frames from the nuc into the hive box in the same order. If the nuc is packed with bees, "
    "add a second box on top of the hive box. Add the hive top and reduce the entrance.",
]
ITS_STEPS = (
    "Place the nuc in its permanent location and remove the block from its entrance. Wait 24 hours for "
    "the bees to orient. Move the nuc to the side and put the empty hive box in its place. Move the "
    "frames into the hive box in the same order. If the nuc is packed with bees, add a second box on "
    "top. Add the hive top and reduce the entrance."
)


def diagnose(server: LiveServer, question: str, answer: str, passages: list[str]) -> dict[str, Any]:
    body = {"question": question, "answer": answer, "passages": [{"text": t} for t in passages]}
    r = httpx.post(server.url + "/v1/diagnose", json=body, timeout=300)
    assert r.status_code == 200, r.text
    diagnosis: dict[str, Any] = r.json()["diagnosis"]
    return diagnosis


def test_passages_that_disagree_on_the_asked_fact_are_a_conflict_over_http(live_server: LiveServer) -> None:
    d = diagnose(live_server, ACQUIRED, "Quenton Ltd was acquired by Halvard Group.", DISAGREE_ON_IT)
    assert d["evidence_conflict"] and d["failure"] == "WR"  # one side stated as fact: not supported
    assert {"step": "evidence_conflict", "failure": "WR"} in d["failure_steps"]
    sides = d["conflict"]["sides"]
    assert [(s["passages"], s["takes_answer"]) for s in sides] == [(["p1"], True), (["p2"], False)]
    assert "Morrow Holdings" in sides[1]["says"]  # quoted from the passage that says otherwise
    assert sides[0]["says"] == DISAGREE_ON_IT[0]  # each side in its own passage's words, not the answer's
    # The other side's answer is as one-sided: the same conflict, the sides the other way round.
    other = diagnose(live_server, ACQUIRED, "Morrow Holdings bought Quenton Ltd.", DISAGREE_ON_IT)
    assert other["conflict"] is not None and other["conflict"]["sides"][0]["passages"] == ["p2"]


def test_each_side_of_a_conflict_weighs_its_sources_trust_over_http(live_server: LiveServer) -> None:
    given = [{"text": t, "trust": w} for t, w in zip(DISAGREE_ON_IT, (0.25, 0.75, 1.0), strict=True)]
    body = {"question": ACQUIRED, "answer": "Quenton Ltd was acquired by Halvard Group.", "passages": given}
    r = httpx.post(live_server.url + "/v1/diagnose", json=body, timeout=300)
    assert r.status_code == 200, r.text
    sides = r.json()["diagnosis"]["conflict"]["sides"]
    assert [(s["passages"], s["trust"]) for s in sides] == [(["p1"], 0.25), (["p2"], 0.75)]
    bad = {**body, "passages": [{"text": "x", "trust": 2}]}
    refused = httpx.post(live_server.url + "/v1/diagnose", json=bad, timeout=60)
    assert refused.status_code == 400 and "trust" in refused.text


def test_passages_that_merely_differ_are_no_conflict_over_http(live_server: LiveServer) -> None:
    d = diagnose(live_server, BORN, "Marie Curie was born in Warsaw.", ONLY_DIFFER)
    assert not d["evidence_conflict"] and d["conflict"] is None and d["failure"] == "NoFailure"


def test_the_steps_of_one_procedure_are_no_conflict_over_http(live_server: LiveServer) -> None:
    d = diagnose(live_server, NUC, ITS_STEPS, ONE_PROCEDURE)
    assert d["conflict"] is None and not d["evidence_conflict"]
    assert "evidence_conflict" not in [step["step"] for step in d["failure_steps"]]


def test_the_user_reads_both_sides_with_their_citations(engine: Engine) -> None:
    passages = tuple(
        Passage(id=f"q{i}", doc_id=f"q{i}", title=f"Q{i}", text=t, score=0.0, retriever="given")
        for i, t in enumerate(DISAGREE_ON_IT, start=1)
    )
    answer = "Quenton Ltd was acquired by Halvard Group."
    d = engine.diagnoser.diagnose(ACQUIRED, passages, answer)
    evidence = [(p.id, p.title) for p in passages]
    shown = present(answer, d, evidence, Reading(), query=ACQUIRED)
    assert shown.policy_applied == "conflict"
    assert (
        shown.text.startswith(DISAGREE)
        and "[1] says: Quenton Ltd, a maker of ship engines, was acquired by Halvard Group in 2015"
        in shown.text
    )
    assert "[2] says: In 2015 Quenton Ltd was bought by Morrow Holdings" in shown.text
    # With conflict_majority, which side more passages take, when the sides differ in size.
    three = (
        *passages,
        Passage(id="q4", doc_id="q4", title="Q4", text=DISAGREE_ON_IT[1], score=0.0, retriever="given"),
    )
    d3 = engine.diagnoser.diagnose(ACQUIRED, three, answer)
    counted = present(
        answer, d3, [(p.id, p.title) for p in three], Reading(conflict_majority=True), query=ACQUIRED
    )
    assert "[2] and [4] say" in counted.text and "More of them (2 of 3) take the second side." in counted.text
    # Where every source says how far it is trusted, the majority is by trust, not by count.
    trusted = tuple(
        p.model_copy(update={"trust": t}) for p, t in zip(three, (0.9, 0.3, 0.5, 0.2), strict=True)
    )
    dt = engine.diagnoser.diagnose(ACQUIRED, trusted, answer)
    assert dt.conflict is not None and [s.trust for s in dt.conflict.sides] == [0.9, 0.5]
    by_trust = present(
        answer, dt, [(p.id, p.title) for p in trusted], Reading(conflict_majority=True), query=ACQUIRED
    )
    assert by_trust.text.endswith("More trusted sources take the first side (trust 0.9 against 0.5).")
    # Off: the answer as generated.
    assert present(answer, d, evidence, Reading(policy="off"), query=ACQUIRED).policy_applied is None


def test_a_live_stream_ends_with_both_sides_as_a_correction() -> None:
    from types import SimpleNamespace
    from typing import cast

    from ragmend.engine.outcome import Outcome
    from ragmend.server.schemas import AnswerResponse

    first = SimpleNamespace(response="The band formed in 1994.")
    outcome = cast(Outcome, SimpleNamespace(first=first, answer=first))
    said = f"{DISAGREE} [1] says: A; [2] says: B."
    reply = cast(
        AnswerResponse,
        SimpleNamespace(answer=said, answer_policy="conflict", answer_note=None, abstained_by=None),
    )
    assert tail(outcome, reply) == f"\n\n[Correction] The answer above is withdrawn. {said}"


def test_a_live_stream_says_in_one_line_why_a_repair_replaced_its_answer() -> None:
    from types import SimpleNamespace
    from typing import cast

    from ragmend.engine.outcome import Outcome
    from ragmend.engine.presentation import REPLACED_BECAUSE
    from ragmend.server.schemas import AnswerResponse

    first = SimpleNamespace(response="The band formed in 1994.")
    repaired = SimpleNamespace(response="The band formed in 1996.")
    said = "The band formed in 1996.[2]"
    reply = cast(
        AnswerResponse,
        SimpleNamespace(answer=said, answer_policy=None, answer_note=None, abstained_by=None),
    )
    for failure, why in REPLACED_BECAUSE.items():
        outcome = cast(
            Outcome,
            SimpleNamespace(first=first, answer=repaired, first_diagnosis=SimpleNamespace(failure=failure)),
        )
        assert tail(outcome, reply) == f"\n\n[Correction] The answer above is replaced, as {why}: {said}"


def test_the_repair_may_choose_to_present_the_conflict_over_http(
    tmp_path: Path, engine: Engine, registry: ModelRegistry
) -> None:
    """present_conflict as the policy's action: no generator call, both sides read whatever the
    answer policy (here off), the trace and the reply say the repair spoke, and its reward is the
    conflict's strength."""
    from ragmend.server.app import create_app

    corpus = tmp_path / "quenton.jsonl"
    rows = [{"id": f"q{i}", "title": f"Source {i}", "text": t} for i, t in enumerate(DISAGREE_PLAINLY, 1)]
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows))
    settings = tiny_settings(
        tmp_path / "data",
        sources=[str(corpus)],
        models={"generator": {"profile": "tiny", "max_tokens": 48}, "escalation": None},
        router={"enabled": False},
        server={"answer_policy": "off"},
        policy={
            "enabled_actions": ["present_conflict"],
            "latency_budget_s": 120.0,
            "request_latency_budget_s": 600.0,
            "state_path": str(tmp_path / "policy.sqlite"),
        },
    )
    eng = Engine(settings, models=ModelRegistry.sharing(registry, settings))
    eng.load()
    try:
        with LiveServer(create_app(eng.settings, engine=eng)) as server:
            r = httpx.post(server.url + "/v1/answer", json={"query": ACQUIRED}, timeout=600)
        assert r.status_code == 200, r.text
        body = r.json()
        first = body["first_diagnosis"]
        assert first is not None and first["conflict"] is not None, body["generated"]
        rep = body["repair"]
        assert rep["action"] == "present_conflict" and rep["kept"] == "conflict" and rep["success"]
        assert body["answer"].startswith(DISAGREE) and body["conflict_by"] == "repair"
        assert body["answer_policy"] == "conflict" and body["abstained_by"] is None
        assert "Morrow Holdings" in body["answer"] and "Halvard Group" in body["answer"]
        assert body["usage"]["by_purpose"].keys() == {"answer"}  # written from the evidence
        assert rep["reward"]["quality"] == pytest.approx(first["conflict"]["strength"])
        assert eng.repairer.policy.stats()["present_conflict"].pulls == 1
    finally:
        eng.close()


def test_present_conflict_is_offered_only_where_the_evidence_disagrees(engine: Engine) -> None:
    from ragmend.engine.repair import offered_actions

    passages = tuple(
        Passage(id=f"b{i}", doc_id=f"b{i}", title="Curie", text=t, score=0.0, retriever="given")
        for i, t in enumerate(ONLY_DIFFER, start=1)
    )
    config = RAGConfig()
    settled = engine.diagnoser.diagnose(BORN, passages, "Marie Curie was born in Paris.")
    offered, masked = offered_actions(engine.settings.policy, config, settled)
    assert "present_conflict" not in offered
    assert [m.name for m in masked] == ["present_conflict"]
    contested = engine.diagnoser.diagnose(
        ACQUIRED,
        tuple(p.model_copy(update={"text": t}) for p, t in zip(passages, DISAGREE_ON_IT, strict=True)),
        "Quenton Ltd was acquired by Halvard Group.",
    )
    assert contested.conflict is not None
    assert "present_conflict" in offered_actions(engine.settings.policy, config, contested)[0]
    # Shown as the repair decided, the answer policy's "off" does not silence it; unasked, "off" does.
    evidence = [(p.id, p.title) for p in passages]
    answer = "Quenton Ltd was acquired by Halvard Group."
    by_repair = present(answer, contested, evidence, Reading(policy="off"), ACQUIRED, decided="conflict")
    assert by_repair.text.startswith(DISAGREE) and by_repair.conflict_by == "repair"
    by_policy = present(answer, contested, evidence, Reading(), ACQUIRED)
    assert by_policy.conflict_by == "answer_policy" and by_policy.text == by_repair.text
    assert present(answer, contested, evidence, Reading(policy="off"), ACQUIRED).conflict_by is None
