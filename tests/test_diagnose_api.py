"""Checking answers ragmend did not write: POST /v1/diagnose and its batch over real HTTP with the
real models, its limits and errors, its metrics, the llama-index evaluator against the live
server, and `ragmend diagnose` (one answer, and a JSONL file resumed after a stop)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from ragmend.engine import Engine
from ragmend.integrations.llama_index import RagmendCheckError, RagmendEvaluator
from tests.conftest import LiveServer, sample_questions

TOWER = (
    "The Eiffel Tower is a wrought-iron lattice tower in Paris. It was designed by the engineering "
    "company of Gustave Eiffel and completed in 1889 for the World's Fair."
)
QUESTION = "When was the Eiffel Tower completed?"
RIGHT = "The Eiffel Tower was completed in 1889."
WRONG = "The Eiffel Tower was completed in 1925 by Thomas Edison."


GIVEN = [{"text": TOWER}]
SPANISH = {"question": "¿Cuándo se terminó la Torre Eiffel?", "answer": "Se terminó en 1889."}


def check(server: LiveServer, body: dict[str, object], path: str = "/v1/diagnose") -> httpx.Response:
    return httpx.post(server.url + path, json=body, timeout=300)


def test_a_supported_and_an_unsupported_answer(live_server: LiveServer, engine: Engine) -> None:
    right = check(live_server, {"question": QUESTION, "answer": RIGHT, "passages": [{"text": TOWER}]})
    named = [{"text": TOWER, "id": "t"}]
    wrong = check(live_server, {"question": QUESTION, "answer": WRONG, "passages": named})
    assert right.status_code == 200 and wrong.status_code == 200, right.text + wrong.text
    r, w = right.json(), wrong.json()
    assert r["object"] == "diagnosis" and r["id"].startswith("check-") and not r["retrieved"]
    assert r["passages"][0]["id"] == "p1" and w["passages"][0]["id"] == "t"
    assert r["supported"] is True and r["diagnosis"]["failure"] == "NoFailure"
    assert w["supported"] is False and w["diagnosis"]["failure"] != "NoFailure"
    assert w["diagnosis"]["verdict"]["p_unsupported"] > r["diagnosis"]["verdict"]["p_unsupported"]
    # Where the wrong one is unsupported: its one sentence, as offsets into the answer.
    assert r["diagnosis"]["unsupported_spans"] == []
    (span,) = w["diagnosis"]["unsupported_spans"]
    assert WRONG[span["start"] : span["end"]] == span["text"] == WRONG and span["claim"] == 0
    # The engine's own diagnoser, called in-process on the same texts, decides the same.
    from ragmend.engine.checking import GivenPassage, given_passages

    d = engine.diagnoser.diagnose(QUESTION, given_passages([GivenPassage(TOWER, "t")]), WRONG)
    assert d.failure == w["diagnosis"]["failure"]
    assert d.verdict is not None
    assert d.verdict.p_unsupported == pytest.approx(w["diagnosis"]["verdict"]["p_unsupported"], abs=1e-6)


FILM = {
    "id": "film",
    "title": "Inception",
    "text": "Inception is a 2010 science fiction action film. It stars Leonardo DiCaprio as a thief who "
    "steals corporate secrets through dream-sharing technology. The film was written and directed by "
    "Christopher Nolan, who also produced it with Emma Thomas. It grossed over $836 million.",
}
RIVER = {
    "id": "river",
    "title": "Seine",
    "text": "The Seine is a river in northern France. It flows through Paris.",
}
NOLAN = {
    "id": "nolan",
    "title": "Christopher Nolan",
    "text": "Christopher Edward Nolan is a British and American filmmaker. Nolan was born in Westminster, "
    "London, and grew up in Highgate. His films have grossed more than $6 billion worldwide.",
}


def test_a_bridge_answer_two_passages_state_is_left_alone_and_a_wrong_one_caught(
    live_server: LiveServer,
) -> None:
    question = "Where was the director of Inception born?"
    body = {"question": question, "passages": [FILM, RIVER, NOLAN]}
    right = check(
        live_server, {**body, "answer": "The director of Inception was born in Westminster, London."}
    )
    wrong = check(live_server, {**body, "answer": "The director of Inception was born in Paris."})
    assert right.status_code == 200 and wrong.status_code == 200, right.text + wrong.text
    r, w = right.json(), wrong.json()
    assert r["supported"] is True and r["diagnosis"]["grade"] is None, r["diagnosis"]["decided_by"]
    (claim,) = r["diagnosis"]["e_r"]["hypotheses"]
    assert claim["best_passage"] == "joint"
    joint = next(s for s in claim["scores"] if s["passage"] == "joint")
    assert joint["joined"] == ["film", "nolan"]  # the two that hold it, past the river between them
    assert w["supported"] is False and w["diagnosis"]["failure"] != "NoFailure"


WELLS = {
    "id": "wells",
    "title": "H. G. Wells",
    "text": "Herbert George Wells (21 September 1866 - 13 August 1946), known as H. G. Wells, was an "
    "English writer. He wrote The Time Machine and The War of the Worlds.",
}
BENNETT = {
    "id": "bennett",
    "title": "Arnold Bennett",
    "text": "Enoch Arnold Bennett (27 May 1867 - 27 March 1931) was an English author, best known as a "
    "novelist. He wrote The Old Wives' Tale.",
}
ELKO = {
    "id": "elko",
    "title": "Elko Regional Airport",
    "text": "Elko Regional Airport is a public airport a mile west of downtown Elko, in Elko County, "
    "Nevada, United States.",
}
FORD = {
    "id": "ford",
    "title": "Gerald R. Ford International Airport",
    "text": "Gerald R. Ford International Airport is a commercial airport in Cascade Township, near Grand "
    "Rapids in Kent County, Michigan.",
}


def test_a_bare_yes_or_no_is_judged_by_what_it_asserts(live_server: LiveServer) -> None:
    """A bare "No" to "both A and B?" holds where a passage denies one of them, a bare "Yes" where
    the passages state both; each wrong one is caught. Each writer's page says "English" of its
    own subject only: it neither supports nor contradicts the other writer."""

    def judged(question: str, answer: str, passages: list[dict[str, str]]) -> dict[str, Any]:
        reply = check(live_server, {"question": question, "answer": answer, "passages": passages})
        assert reply.status_code == 200, reply.text
        body: dict[str, Any] = reply.json()
        return body

    airports = "Are both Elko Regional Airport and Gerald R. Ford International Airport located in Michigan?"
    writers = "Were H. G. Wells and Arnold Bennett both English?"
    right_no = judged(airports, "No", [ELKO, FORD])
    right_yes = judged(writers, "Yes.", [WELLS, BENNETT])
    assert right_no["supported"] is True and right_yes["supported"] is True, (right_no, right_yes)
    assert judged(airports, "Yes", [ELKO, FORD])["supported"] is False
    assert judged(writers, "No", [WELLS, BENNETT])["supported"] is False
    (denied,) = right_no["diagnosis"]["e_r"]["hypotheses"]
    assert denied["hypothesis"] == (
        "It is not true that Elko Regional Airport is located in Michigan and "
        "Gerald R. Ford International Airport is located in Michigan."
    )
    assert denied["best_passage"] == "elko"  # the passage that contradicts one of them
    for claim in right_yes["diagnosis"]["e_r"]["hypotheses"]:  # no writer's page denies the other
        assert max(s["contradict"] for s in claim["scores"]) < 0.5, claim


def test_without_passages_the_corpus_retrieves_them(live_server: LiveServer) -> None:
    q = sample_questions()[3]
    r = check(live_server, {"question": q["question"], "answer": "I do not know."})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["retrieved"] and body["passages"]
    assert any(p["title"] in q["supporting_titles"] for p in body["passages"])


def test_a_batch_is_checked_in_order_and_told_to_the_metrics(live_server: LiveServer) -> None:
    def checked(verdict: str) -> float:
        text = httpx.get(live_server.url + "/metrics").text
        line = f'ragmend_checked_answers_total{{verdict="{verdict}"}}'
        return sum(float(x.split()[-1]) for x in text.splitlines() if x.startswith(line))

    before = {v: checked(v) for v in ("supported", "unsupported", "not_judged")}
    items = [
        {"question": QUESTION, "answer": RIGHT, "passages": [{"text": TOWER}]},
        {"question": QUESTION, "answer": WRONG, "passages": [{"text": TOWER}]},
        {**SPANISH, "passages": GIVEN},
    ]
    r = check(live_server, {"items": items}, "/v1/diagnose/batch")
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    assert [d["supported"] for d in data] == [True, False, None]
    assert data[2]["diagnosis"]["not_judged"] and data[2]["diagnosis"]["failure"] == "NoFailure"
    assert len({d["id"] for d in data}) == 3
    after = {v: checked(v) for v in before}
    assert {v: after[v] - before[v] for v in before} == {"supported": 1, "unsupported": 1, "not_judged": 1}


@pytest.mark.parametrize(
    ("path", "body", "status", "message"),
    [
        ("/v1/diagnose", {"answer": "  ", "passages": [{"text": TOWER}]}, 400, "answer: empty"),
        ("/v1/diagnose", {"answer": RIGHT}, 400, "question: needed to retrieve passages"),
        ("/v1/diagnose", {"answer": RIGHT, "passages": []}, 400, "passages: empty"),
        ("/v1/diagnose", {"answer": RIGHT, "passages": [{"text": ""}]}, 400, "passages[0].text: empty"),
        ("/v1/diagnose", {"answer": RIGHT, "passages": [{"text": "x"}] * 51}, 400, "check_max_passages"),
        ("/v1/diagnose", {"answer": RIGHT, "passages": [{"text": "x" * 50_001}]}, 400, "check_max_passage_"),
        ("/v1/diagnose", {"answer": "x" * 20_001, "passages": GIVEN}, 400, "check_max_answer_chars"),
        (
            "/v1/diagnose",
            {"answer": RIGHT, "passages": [{"text": "a", "id": "x"}, {"text": "b", "id": "x"}]},
            400,
            "same id",
        ),
        ("/v1/diagnose", {"answer": RIGHT, "passages": [{"text": TOWER}], "model": "nope"}, 404, "nope"),
        ("/v1/diagnose", {"answer": RIGHT, "passage": TOWER}, 400, "passage"),
        ("/v1/diagnose/batch", {"items": []}, 400, "items"),
        (
            "/v1/diagnose/batch",
            {"items": [{"answer": RIGHT, "passages": GIVEN}, {"answer": "", "passages": GIVEN}]},
            400,
            "items[1].answer: empty",
        ),
        ("/v1/diagnose/batch", {"items": [{"answer": RIGHT, "passages": GIVEN}] * 65}, 400, "max_batch"),
        ("/v1/diagnose", {"answer": RIGHT, "passages": [{"text": "x" * 40_000}] * 30}, 413, "over the limit"),
    ],
)
def test_every_limit_and_bad_input_is_a_4xx_naming_the_field(
    live_server: LiveServer, path: str, body: dict[str, object], status: int, message: str
) -> None:
    r = check(live_server, body, path)
    assert r.status_code == status, r.text
    assert message in r.json()["error"]["message"]


def test_the_llama_index_evaluator_against_the_live_server(live_server: LiveServer) -> None:
    evaluator = RagmendEvaluator(live_server.url)
    right = evaluator.evaluate(query=QUESTION, response=RIGHT, contexts=[TOWER])
    wrong = evaluator.evaluate(query=QUESTION, response=WRONG, contexts=[TOWER])
    assert right.passing is True and wrong.passing is False
    assert right.score is not None and wrong.score is not None and right.score > wrong.score
    assert wrong.feedback and wrong.feedback.startswith("unsupported") and "Edison" in wrong.feedback
    in_a_loop = asyncio.run(evaluator.aevaluate(query=QUESTION, response=WRONG, contexts=[TOWER]))
    assert in_a_loop.passing is False and in_a_loop.score == pytest.approx(wrong.score, abs=1e-6)
    spanish = evaluator.evaluate(query="¿Cuándo?", response="Se terminó en 1889.", contexts=[TOWER])
    assert spanish.invalid_result and spanish.invalid_reason
    with pytest.raises(RagmendCheckError, match=r"400.*answer: empty"):
        evaluator.evaluate(query=QUESTION, response=" ", contexts=[TOWER])


def ragmend(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "ragmend.cli", "--data-dir", str(tmp / "data"), "diagnose", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=600)


def test_the_command_checks_one_answer_and_a_file_it_resumes(tmp_path: Path) -> None:
    one = ragmend(tmp_path, "--question", QUESTION, "--answer", WRONG, "--passage", TOWER)
    assert one.returncode == 0, one.stderr
    assert json.loads(one.stdout)["supported"] is False

    requests = tmp_path / "answers.jsonl"
    rows = [
        {"id": "a", "question": QUESTION, "answer": RIGHT, "passages": [{"text": TOWER}]},
        {"id": "b", "question": QUESTION, "answer": WRONG, "passages": [{"text": TOWER}]},
        {"question": QUESTION, "answer": "It opened in 1889.", "passages": [{"text": TOWER}]},
    ]
    requests.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "checked.jsonl"
    # A previous run that wrote "a" whole and was stopped halfway through the next line.
    first = json.loads(one.stdout) | {"id": "a"}
    out.write_text(json.dumps(first) + "\n" + '{"id": "b", "diagn')
    run = ragmend(tmp_path, str(requests), "--out", str(out))
    assert run.returncode == 0, run.stderr
    assert "3 answers, 1 already in" in " ".join(run.stderr.split())
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert [w["id"] for w in written] == ["a", "b", "line-3"]
    assert written[1]["supported"] is False

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"answer": "x"}\nnot json\n')
    failed = ragmend(tmp_path, str(bad), "--out", str(tmp_path / "bad-out.jsonl"))
    assert failed.returncode == 2 and "bad.jsonl:2: not valid JSON" in " ".join(failed.stderr.split())
    neither = ragmend(tmp_path)
    assert neither.returncode == 2 and "a requests file or --answer" in " ".join(neither.stderr.split())
