"""Diagnosis of real answers: the shipped NLI model, real embeddings, the real pipeline (tiny
generator), through the engine, the CLI and HTTP. Accuracy of the rule is measured by
`ragmend bench diagnosis`, not here; these pin what every answer carries and that the pieces
agree with each other."""

from __future__ import annotations

import json
from dataclasses import replace

import httpx
import numpy as np
import pytest
from typer.testing import CliRunner

from ragmend.diagnosis.diagnoser import Diagnoser
from ragmend.diagnosis.options import shipped_options
from ragmend.diagnosis.types import KAPPAS, NLI_STATES
from ragmend.engine import Engine
from ragmend.rag.types import Passage
from tests.conftest import sample_questions


def passage(pid: str, title: str, text: str) -> Passage:
    return Passage(id=pid, doc_id=pid.split("#")[0], title=title, text=text, score=1.0, retriever="dense")


CURIE = passage(
    "Marie Curie#0",
    "Marie Curie",
    "Marie Curie was a Polish and naturalised-French physicist and chemist. She was born in Warsaw in "
    "1867 and won the Nobel Prize in Physics in 1903.",
)
OFF_TOPIC = passage(
    "Banana#0", "Banana", "A banana is an elongated, edible fruit produced by plants of the genus Musa."
)


def test_every_answer_carries_a_full_diagnosis(engine: Engine) -> None:
    q = sample_questions(1)[0]
    outcome = engine.respond(q["question"])
    d = outcome.diagnosis
    assert d is not None
    # The failure type and the stage agree: a stage is named exactly when a failure is found.
    assert (d.stage == "none") == (not d.failed) and d.kappa in KAPPAS
    assert d.e_q.state in NLI_STATES and d.e_r.state in NLI_STATES
    # Passage-level scores: one per evidence passage (plus the joint premise where it may bridge
    # the claim), probabilities summing to 1.
    scores = d.e_q.hypotheses[0].scores
    assert [s.passage for s in scores if s.passage != "joint"] == [p.id for p in outcome.answer.evidence]
    for s in scores:
        assert s.entail + s.neutral + s.contradict == pytest.approx(1.0, abs=2e-3)
    assert set(d.timings) >= {"nli_s", "kg_s", "egc_s", "total_s"} and d.timings["total_s"] > 0
    assert d.stage_reason and -1 / 3 - 1e-6 <= d.egc.score <= 1.0


def test_all_pairs_of_one_answer_go_in_one_nli_call(engine: Engine) -> None:
    calls: list[int] = []

    class CountingNLI:
        """The real model, counting its calls (a thin wrapper, not a fake)."""

        def __init__(self, inner: object) -> None:
            self.inner = inner

        def predict(self, pairs: list[tuple[str, str]]) -> object:
            calls.append(len(pairs))
            return self.inner.predict(pairs)  # type: ignore[attr-defined]

    d = Diagnoser(CountingNLI(engine.models.nli), engine.diagnoser.embed, shipped_options())
    response = "Marie Curie was born in Warsaw. She won the Nobel Prize in Physics in 1903."
    diagnosis = d.diagnose("Where was Marie Curie born?", [CURIE, OFF_TOPIC], response)
    # (query statement + 2 claims) x (2 passages + the joint premise) at most, in one call: a
    # pair repeated (an answer sentence that is its own question statement) goes once, and the
    # joint premise only meets a hypothesis whose names and numbers it holds.
    assert len(calls) == 1 and 2 * 3 <= calls[0] <= 3 * 3
    assert len(diagnosis.e_r.hypotheses) == 2
    for h in (*diagnosis.e_q.hypotheses, *diagnosis.e_r.hypotheses):
        assert {s.passage for s in h.scores} >= {CURIE.id, OFF_TOPIC.id}
    # A one-sentence answer is its own question statement: one text, each premise once.
    d.diagnose("Where was Marie Curie born?", [CURIE, OFF_TOPIC], "Marie Curie was born in Warsaw.")
    assert len(calls) == 2 and calls[1] <= 3


def test_supported_and_contradicted_answers_differ(engine: Engine) -> None:
    d = engine.diagnoser
    good = d.diagnose("Where was Marie Curie born?", [CURIE, OFF_TOPIC], "Marie Curie was born in Warsaw.")
    bad = d.diagnose("Where was Marie Curie born?", [CURIE, OFF_TOPIC], "Marie Curie was born in Lisbon.")
    p_good = max(s.entail for s in good.e_r.hypotheses[0].scores)
    p_bad = max(s.entail for s in bad.e_r.hypotheses[0].scores)
    assert p_good > p_bad
    # e_r.support is the graded verdict: the mean of each claim's best P(entail) (one claim here).
    assert good.e_r.support is not None and bad.e_r.support is not None
    assert good.e_r.support == pytest.approx(p_good, abs=1e-4) and bad.e_r.support < good.e_r.support
    off = d.diagnose("Where was Marie Curie born?", [OFF_TOPIC], "I don't know.")
    assert off.failure == "IE" and off.e_r.construction == "abstained" and off.e_r.support is None
    assert off.stage == "retrieval"


def test_claim_mode_gates_the_label(engine: Engine) -> None:
    d = engine.diagnoser.diagnose("Bananas are a kind of fish.", [OFF_TOPIC, CURIE], "SUPPORTS", mode="claim")
    assert d.label == "SUPPORTS"
    if d.failure in ("IE", "LEM"):
        assert d.final_label == "NOT ENOUGH INFO"
    else:
        assert d.final_label == "SUPPORTS"


HUNGER_GAMES = passage(
    "The Hunger Games (film series)#0",
    "The Hunger Games (film series)",
    "Gary Ross directed the first film, while Francis Lawrence directed the next three films.",
)


def test_a_right_label_is_not_failed_by_a_reason_the_passages_only_do_not_state(engine: Engine) -> None:
    """The user asked whether the claim holds: a REFUTES the evidence agrees with, explained by a
    restatement NLI cannot entail ("..., not a gorilla"), is left alone; a wrong label, or a right
    one whose reason a passage contradicts, still fails."""
    claim = "The Hunger Games film series' first film was directed by a gorilla."

    def failure(response: str) -> str:
        return engine.diagnoser.diagnose(claim, [HUNGER_GAMES], response, mode="claim").failure

    assert failure("REFUTES") == "NoFailure"
    assert failure("REFUTES\n\nThe first film was directed by Gary Ross, not a gorilla.") == "NoFailure"
    assert (
        failure("REFUTES\nPassage [1] clearly states that Gary Ross directed the first film.") == "NoFailure"
    )
    assert failure("SUPPORTS\n\nThe first film was directed by a gorilla.") == "WR"
    assert failure("REFUTES\n\nGary Ross directed none of the films.") == "WR"


def test_empty_evidence_and_empty_response_are_defined(engine: Engine) -> None:
    d = engine.diagnoser.diagnose("Who?", [], "")
    assert d.failure == "IE" and d.e_r.construction == "empty" and d.egc.coverage == 0.0


def test_http_and_cli_return_the_diagnosis(engine: Engine, live_server: object) -> None:
    q = sample_questions(2)[1]
    r = httpx.post(live_server.url + "/v1/answer", json={"query": q["question"]}, timeout=120)  # type: ignore[attr-defined]
    assert r.status_code == 200, r.text
    d = r.json()["diagnosis"]
    assert (d["stage"] == "none") == (d["failure"] == "NoFailure") and d["kg"]["kappa"] in KAPPAS
    assert {"e_q", "e_r", "egc", "evidence_conflict", "stage", "stage_reason", "timings"} <= set(d)
    assert np.isfinite(d["egc"]["score"])
    # How the failure was decided: every rule that applies, in the table's order; the first
    # decided the failure the reply carries, and the last is the table's catch-all.
    steps = d["failure_steps"]
    assert steps[0] == {"step": d["decided_by"], "failure": d["failure"]}
    assert steps[-1] == {"step": "no_failure", "failure": "NoFailure"} and d["verdict"] is not None


def test_a_question_in_another_language_is_answered_unjudged_over_http(live_server: object) -> None:
    from ragmend.engine.presentation import NOT_CHECKED

    r = httpx.post(
        live_server.url + "/v1/answer",  # type: ignore[attr-defined]
        json={"query": "Welcher Flughafen liegt in Elko, Nevada?"},
        timeout=120,
    )
    assert r.status_code == 200, r.text
    body = r.json()
    d = body["diagnosis"]
    assert d["language"] == "de" and "English" in d["not_judged"]
    # Nothing was checked, so nothing is repaired and the reader is told.
    assert body["repair"] is None and body["first_diagnosis"] is None
    assert body["answer"].endswith(NOT_CHECKED)


def test_ask_json_includes_the_diagnosis(engine: Engine) -> None:
    from ragmend.cli.main import app

    env = {
        "RAGMEND_DATA_DIR": str(engine.settings.data_dir),
        "RAGMEND_CACHE_DIR": str(engine.settings.cache_dir),
    }
    sources = json.dumps([str(p) for p in engine.settings.sources])
    env["RAGMEND_SOURCES"] = sources
    result = CliRunner().invoke(
        app, ["--profile", "tiny", "ask", sample_questions(1)[0]["question"], "--json"], env=env
    )
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert {"failure", "e_q", "e_r", "kg", "egc", "stage", "stage_reason"} <= set(body["diagnosis"])
    # The first pass's diagnosis is there only when it failed and went to the repair.
    first = body["first_diagnosis"]
    assert (first is None) == (body["repair"] is None)
    assert first is None or first["failure"] != "NoFailure"


def test_the_corpus_graph_is_built_at_ingest_and_aligns_responses(engine: Engine) -> None:
    kg = engine.corpus.kg
    assert kg is not None
    stats = kg.store.stats()
    assert stats.docs == len(engine.corpus.index.snapshot.manifest.docs) and stats.triples > 50
    same = kg.signal("Elko Regional Airport is in Elko County.")
    other = kg.signal("Elko Regional Airport is in Michigan.")
    assert same.kappa == "consistent" and same.available
    assert other.kappa == "conflict"
    assert other.matches and other.matches[0].kg_triple is not None and other.matches[0].source
    # The copula holds many objects: another true description is not a conflict, another name is.
    assert kg.signal("Andrew Jaspan was the co-founder of The Conversation.").kappa != "conflict"
    assert kg.signal("Andrew Jaspan was a French journalist.").kappa == "conflict"
    assert kg.signal("Yes.").kappa == "no_triplet"
    # The diagnosis carries the same signal, with its matched triples as the explanation.
    d_passages = list(engine.corpus.index.retriever.retrieve("Elko Regional Airport", "dense", 3))
    d = engine.diagnoser.diagnose(
        "Where is Elko Regional Airport?", d_passages, "Elko Regional Airport is in Michigan."
    )
    assert d.kappa == "conflict" and d.failure == "WP"
    # A place within a place: the graph's triple says Elko County, the passage it was read from
    # says Nevada too and entails the answer. The graph alone calls it a conflict; the diagnosis
    # does not (the walkthrough's "Which airport is in Nevada, ...?" answered right got WP).
    nevada = "Elko Regional Airport is in Nevada."
    assert kg.signal(nevada).kappa == "conflict"
    d = engine.diagnoser.diagnose("Where is Elko Regional Airport?", d_passages, nevada)
    assert d.kappa == "consistent" and d.failure != "WP", d.kg
    assert [m.verdict for m in d.kg.matches] == ["entailed"]


def test_a_bare_answer_span_is_judged_in_the_question_context(engine: Engine) -> None:
    d = engine.diagnoser.diagnose("When was Marie Curie born?", [CURIE, OFF_TOPIC], "23")
    assert [v.hypothesis for v in d.e_r.hypotheses] == ["Marie Curie was born in 23."]
    good = engine.diagnoser.diagnose("When was Marie Curie born?", [CURIE, OFF_TOPIC], "1867")
    assert good.e_r.hypotheses[0].hypothesis == "Marie Curie was born in 1867."
    assert max(s.entail for s in good.e_r.hypotheses[0].scores) > max(
        s.entail for s in d.e_r.hypotheses[0].scores
    )


def test_a_claim_about_the_tail_of_a_long_passage_is_read_where_it_is(engine: Engine) -> None:
    """The NLI model reads 256 tokens and drops the rest of a premise: a fact in the last sentence
    of a long passage was out of its sight, so no summary of it could be supported. Read in
    windows of whole sentences (diagnosis.premise_words), the passage supports it."""
    filler = " ".join(
        f"In {year} the society held its annual meeting in the town hall and elected a new committee."
        for year in range(1901, 1921)
    )
    long = passage("Society#0", "Society", f"{filler} The society was dissolved in 1987 in Leeds.")
    claim = "The society was dissolved in 1987."
    options = engine.diagnoser.options
    assert options.premise_words == 128  # half of the NLI model's 256 tokens, by default
    # The shipped options read a long passage by windows; premise_words 0 truncates it instead.
    windowed = Diagnoser(engine.models.nli, engine.diagnoser.embed, shipped_options())
    truncated = Diagnoser(
        engine.models.nli, engine.diagnoser.embed, replace(shipped_options(), premise_words=0)
    )
    before = truncated.diagnose("Summarize the following text.", [long], claim)
    after = windowed.diagnose("Summarize the following text.", [long], claim)
    assert before.e_r.hypotheses[0].scores[0].truncated and before.e_r.state != "entail"
    assert after.e_r.state == "entail", after.e_r
    assert not after.e_r.hypotheses[0].scores[0].truncated


def test_a_claim_one_passage_holds_is_judged_by_that_passage_alone(engine: Engine) -> None:
    """No joint premise for a claim whose words one passage holds: the answer cites only the
    passage that says it, and the pair costs no NLI time."""
    from ragmend.engine.presentation import present

    louvre = passage(
        "louvre#0",
        "louvre",
        "The Louvre is the world's most-visited art museum, located in Paris. It houses the Mona Lisa, "
        "painted by Leonardo da Vinci. The museum opened on 10 August 1793.",
    )
    eiffel = passage(
        "eiffel#0",
        "Eiffel Tower",
        "# Eiffel Tower\n\nThe Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in "
        "Paris, France. It is named after the engineer Gustave Eiffel, whose company designed and built "
        "the tower from 1887 to 1889. Its height is 330 metres.",
    )
    response = "Leonardo da Vinci painted the Mona Lisa."
    d = engine.diagnoser.diagnose("Who painted the Mona Lisa?", [louvre, eiffel], response)
    (claim,) = d.e_r.hypotheses
    assert [x.passage for x in claim.scores] == [louvre.id, eiffel.id]
    assert claim.state == "entail" and claim.best_passage == louvre.id
    shown = present(response, d, [(louvre.id, louvre.title), (eiffel.id, eiffel.title)])
    assert shown.text == "Leonardo da Vinci painted the Mona Lisa.[1]"


def test_a_bridge_claim_two_passages_state_is_supported_and_cites_both(engine: Engine) -> None:
    """A two-hop fact no single passage states: the claim's joint premise (the two passages that
    hold its words, each by its sentences on the claim) entails it, and the sentence cites both,
    even when an unrelated passage ranks between them."""
    from ragmend.engine.presentation import present

    film = passage(
        "film#0",
        "Inception",
        "Inception is a 2010 science fiction action film. It stars Leonardo DiCaprio as a thief who "
        "steals corporate secrets through dream-sharing technology. The film was written and directed "
        "by Christopher Nolan, who also produced it with Emma Thomas. It grossed over $836 million.",
    )
    river = passage("seine#0", "Seine", "The Seine is a river in northern France. It flows through Paris.")
    person = passage(
        "nolan#0",
        "Christopher Nolan",
        "Christopher Edward Nolan is a British and American filmmaker. Nolan was born in Westminster, "
        "London, and grew up in Highgate. His films have grossed more than $6 billion worldwide.",
    )
    response = "The director of Inception was born in Westminster, London."
    passages = [film, river, person]
    d = engine.diagnoser.diagnose("Where was the director of Inception born?", passages, response)
    (claim,) = d.e_r.hypotheses
    joint = next((x for x in claim.scores if x.passage == "joint"), None)
    assert joint is not None, claim.scores
    alone = max(x.entail for x in claim.scores if x.passage != "joint")
    assert joint.joined == (film.id, person.id)
    assert joint.entail > alone, claim.scores  # the case this test is about
    assert claim.state == "entail" and claim.best_passage == "joint"
    assert d.failure == "NoFailure", (d.decided_by, d.verdict)
    shown = present(response, d, [(p.id, p.title) for p in passages])
    assert shown.text == f"{response}[1][3]"
