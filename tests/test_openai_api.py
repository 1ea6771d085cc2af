"""The OpenAI-compatible API over real HTTP, with the official openai client and the real engine."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any, cast

import httpx
import openai
import pytest
from openai import OpenAI

from ragmend.diagnosis.hypotheses import is_abstention
from ragmend.engine import Engine
from ragmend.engine.presentation import ABSTENTION_TEXT, CORRECTION, NOT_SUPPORTED, correction
from ragmend.server.app import create_app
from ragmend.server.chat_sources import CitedSources
from ragmend.server.openai_api import DRAFT_HEADING
from ragmend.server.schemas import AnswerResponse
from ragmend.settings import UNANSWERED_BELOW, settings_with
from tests.conftest import LiveServer, sample_questions

CHAT = "/v1/chat/completions"
# Nothing in the test corpus answers it: the diagnosis fails it and the policy repairs.
UNANSWERABLE_QUESTION = "What is the name of the dragon that lives under the royal castle of Wawel?"


def client_for(server: LiveServer) -> OpenAI:
    return OpenAI(base_url=server.url + "/v1", api_key="unused", timeout=300, max_retries=0)


def answers_counted(server: LiveServer) -> float:
    text = httpx.get(server.url + "/metrics").text
    rows = re.findall(r"^ragmend_answers_total\{(.*)\} (\S+)$", text, re.M)
    return sum(float(value) for labels, value in rows if 'pass="final"' in labels)


def in_flight(server: LiveServer) -> float:
    text = httpx.get(server.url + "/metrics").text
    found = re.search(r"^ragmend_requests_in_flight (\S+)$", text, re.M)
    assert found, "ragmend_requests_in_flight is exported"
    return float(found.group(1))


@pytest.fixture(scope="module")
def no_repair_server(engine: Engine) -> Iterator[LiveServer]:
    """The same index and models with repair and the router off: each learns from every answer,
    so two requests for one question may repair or route differently; without them, temperature
    0 makes the answer a function of the question (what the streamed-equals-unstreamed test
    needs)."""
    settings = settings_with(engine.settings, policy={"repair": False}, router={"enabled": False})
    plain = Engine(settings, models=engine.models)
    plain.load()
    with LiveServer(create_app(settings, engine=plain, load_on_start=False)) as server:
        yield server


def test_chat_completion_with_the_openai_client(live_server: LiveServer) -> None:
    q = sample_questions()[3]
    before = answers_counted(live_server)
    raw = client_for(live_server).chat.completions.with_raw_response.create(
        model="ragmend",
        messages=[
            {"role": "system", "content": "Answer briefly."},
            {"role": "user", "content": "Hello."},
            {"role": "assistant", "content": "Hello! Ask me anything."},
            {"role": "user", "content": q["question"]},
        ],
        temperature=0,
        max_tokens=40,
        top_p=1,  # the neutral value of a field ragmend does not serve: accepted
        user="test-suite",
    )
    resp = raw.parse()
    assert resp.object == "chat.completion" and resp.id.startswith("chatcmpl-") and resp.model == "ragmend"
    choice = resp.choices[0]
    assert choice.message.role == "assistant" and (choice.message.content or "").strip()
    assert choice.finish_reason in ("stop", "length")
    assert resp.usage is not None and resp.usage.completion_tokens > 0
    assert resp.usage.total_tokens == resp.usage.prompt_tokens + resp.usage.completion_tokens

    ext = raw.http_response.json()["ragmend"]  # the extension, in the raw body
    assert resp.model_extra is not None and ext == resp.model_extra["ragmend"]  # ... and kept by the client
    # The content is the extension's answer with its passages numbered as the sources it cites.
    cited = CitedSources.of(AnswerResponse.model_validate(ext))
    assert ext["query"] == q["question"] and cited.renumber(ext["answer"]) == choice.message.content
    # What the user reads is the presented answer: citations, and the policy's note if it failed.
    assert ext["generated"].strip() and isinstance(ext["citations"], list)
    if ext["abstained_by"] == "repair":
        # The repair chose to abstain: one voice, the abstention, with no note of the answer policy.
        assert ext["answer_policy"] == "abstain" and ext["answer_note"] is None
        assert ext["answer"].startswith(ABSTENTION_TEXT) and ext["repair"]["kept"] == "abstained"
    elif ext["diagnosis"]["failure"] == "IE":
        # The default answer policy (abstain_unanswered): the sources do not answer it, so say so.
        assert ext["answer_policy"] == "abstain" and ext["abstained_by"] == "answer_policy"
        assert ext["answer"].startswith(ABSTENTION_TEXT) and ext["answer_note"] is None
    elif ext["diagnosis"]["failure"] != "NoFailure":
        d = ext["diagnosis"]
        if d["grade"] == "uncertain":  # kept, marked, with how sure the check is
            assert ext["answer_policy"] == "marked" and ext["answer"].endswith(ext["answer_note"])
        elif (d["e_q"]["support"] or 0.0) < UNANSWERED_BELOW:  # still unsupported, and unanswered
            assert ext["answer_policy"] == "abstain" and ext["abstained_by"] == "answer_policy"
            assert ext["answer"].startswith(ABSTENTION_TEXT)
        else:
            assert ext["answer_policy"] == "annotate"
            assert ext["answer"].endswith(NOT_SUPPORTED)
    # usage is every generator call of the request, split by purpose in the extension.
    by = ext["usage"]["by_purpose"]
    assert by["answer"]["calls"] == 1
    assert resp.usage.prompt_tokens == sum(u["prompt_tokens"] for u in by.values())
    assert resp.usage.completion_tokens == sum(u["completion_tokens"] for u in by.values())
    assert any(p["title"] in q["supporting_titles"] for p in ext["evidence"])
    assert set(ext["timings"]) >= {"retrieve_s", "rerank_s", "generate_s"}
    # temperature and max_tokens reached the generator (the repaired pass samples like the first).
    assert (ext["config"]["temperature"], ext["config"]["max_tokens"]) == (0.0, 40)
    if ext["diagnosis"]["failure"] != "NoFailure" or ext["first_diagnosis"] is not None:
        assert ext["repair"] is not None
    assert answers_counted(live_server) == before + 1  # observed like /v1/answer


@pytest.mark.parametrize("mode", ["draft", "live", "verify_first"])
def test_streamed_answer_equals_the_unstreamed_one(no_repair_server: LiveServer, mode: str) -> None:
    """Draft: the generated text as it comes in reasoning_content, under the draft's heading, then
    the unstreamed content exactly. Live: the generated text as content, then the answer policy's
    note if the answer is unsupported, or its abstention as a marked correction (citations ride in
    the extension). verify_first: the unstreamed content exactly, and no draft."""
    client = client_for(no_repair_server)
    q = sample_questions()[0]["question"]
    whole = client.chat.completions.create(
        model="ragmend", messages=[{"role": "user", "content": q}], temperature=0, max_tokens=32
    )
    stream = client.chat.completions.create(
        model="ragmend",
        # Text parts instead of a string: the same question.
        messages=[{"role": "user", "content": [{"type": "text", "text": q}]}],
        temperature=0,
        max_tokens=32,
        stream=True,
        stream_options=cast(Any, {"include_usage": True, "mode": mode}),
    )
    chunks = list(stream)
    assert all(c.object == "chat.completion.chunk" and c.id == chunks[0].id for c in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    drafts = [(c.choices[0].delta.model_extra or {}).get("reasoning_content") for c in chunks if c.choices]
    draft = "".join(d or "" for d in drafts)
    assert whole.model_extra is not None
    unstreamed = whole.model_extra["ragmend"]
    if mode == "draft":
        assert draft == DRAFT_HEADING + unstreamed["generated"]
        assert content == whole.choices[0].message.content
        assert len([d for d in drafts if d]) > 2  # really in pieces
        # The draft comes first: no content before the last piece of the draft.
        last_draft = max(i for i, d in enumerate(drafts) if d)
        assert not "".join(c.choices[0].delta.content or "" for c in chunks[:last_draft] if c.choices)
    elif mode == "verify_first":
        assert content == whole.choices[0].message.content and not draft
    elif unstreamed["abstained_by"] and is_abstention(unstreamed["generated"]):
        assert content == unstreamed["generated"]  # an abstention is said once
    elif unstreamed["answer_policy"] == "abstain":
        assert content == unstreamed["generated"] + f"\n\n{correction(unstreamed['answer'])}"
    else:
        note = f" {unstreamed['answer_note']}" if unstreamed["answer_note"] else ""
        assert content == unstreamed["generated"] + note
    if mode == "live":
        assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) > 1  # really in pieces
        assert not draft

    finish = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert len(finish) == 1 and finish[0].choices[0].finish_reason == whole.choices[0].finish_reason
    last = chunks[-1]
    assert last.choices == [] and last.usage is not None  # include_usage: the usage chunk is last
    assert whole.usage is not None and last.usage.completion_tokens == whole.usage.completion_tokens
    assert last.model_extra is not None
    ext = last.model_extra["ragmend"]  # the diagnosis rides on the last chunk
    assert ext["answer"] == unstreamed["answer"] and ext["diagnosis"] is not None and ext["repair"] is None
    assert all("ragmend" not in (c.model_extra or {}) for c in chunks[:-1])


def test_stream_wire_format(no_repair_server: LiveServer) -> None:
    """The raw events: `data: <json>` lines, `data: [DONE]` last, no usage without include_usage."""
    body = {
        "messages": [{"role": "user", "content": sample_questions()[0]["question"]}],
        "temperature": 0,
        "max_tokens": 32,
        "stream": True,
    }
    with httpx.stream("POST", no_repair_server.url + CHAT, json=body, timeout=300) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        events = [line for line in r.iter_lines() if line]
    assert all(e.startswith("data: ") for e in events) and events[-1] == "data: [DONE]"
    chunks = [json.loads(e.removeprefix("data: ")) for e in events[:-1]]
    assert all("usage" not in c for c in chunks)
    reasons = [c["choices"][0]["finish_reason"] for c in chunks]
    assert reasons[:-1] == [None] * (len(chunks) - 1) and reasons[-1] in ("stop", "length")  # explicit nulls
    assert chunks[-1]["choices"][0]["delta"] == {} and "ragmend" in chunks[-1]


def test_max_tokens_reaches_the_generator(no_repair_server: LiveServer) -> None:
    resp = client_for(no_repair_server).chat.completions.create(
        model="ragmend",
        messages=[{"role": "user", "content": sample_questions()[1]["question"]}],
        max_completion_tokens=2,
    )
    assert resp.usage is not None and resp.usage.completion_tokens == 2
    assert resp.choices[0].finish_reason == "length"


def test_models_list_and_unknown_model(live_server: LiveServer, engine: Engine) -> None:
    client = client_for(live_server)
    assert [m.id for m in client.models.list()] == ["ragmend"]
    assert client.models.retrieve("ragmend").owned_by == "ragmend"
    # The generator's own model string is accepted too.
    assert client.models.retrieve(engine.models.generator.model).id == engine.models.generator.model
    with pytest.raises(openai.NotFoundError) as e:
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    assert e.value.code == "model_not_found" and "gpt-4o" in e.value.message
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("gpt-4o")


def test_served_model_name_is_configurable(engine: Engine) -> None:
    settings = settings_with(engine.settings, server={"model_name": "acme-rag"})
    renamed = Engine(settings, models=engine.models)  # not loaded: the model is checked first
    with LiveServer(create_app(settings, engine=renamed, load_on_start=False)) as server:
        assert [m.id for m in client_for(server).models.list()] == ["acme-rag"]
        r = httpx.post(
            server.url + CHAT, json={"model": "ragmend", "messages": [{"role": "user", "content": "x"}]}
        )
        assert r.status_code == 404 and r.json()["error"]["param"] == "model"


USER = [{"role": "user", "content": "Who founded Marvel?"}]


@pytest.mark.parametrize(
    ("payload", "status", "names"),
    [
        ({}, 400, "messages"),
        ({"messages": "hi"}, 400, "messages"),
        ({"messages": []}, 400, "messages"),
        ({"messages": [{"role": "assistant", "content": "hi"}]}, 400, "user"),
        ({"messages": [{"role": "user", "content": "   "}]}, 400, "messages.0.content"),
        ({"messages": [{"role": "user"}]}, 400, "messages.0.content"),
        ({"messages": [{"role": "user", "content": 42}]}, 400, "messages.0.content"),
        ({"messages": [{"role": "wizard", "content": "hi"}]}, 400, "messages.0.role"),
        ({"messages": [{"content": "hi"}]}, 400, "messages.0.role"),
        ({"messages": ["hi"]}, 400, "messages.0"),
        (
            {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
            400,
            "messages.0.content",
        ),
        ({"messages": [{"role": "user", "content": "x" * 5000}]}, 400, "over the maximum"),
        # A conversation's bounds: at most 100 messages of at most 20,000 characters each.
        ({"messages": [{"role": "user", "content": "hi"}] * 101}, 400, "messages"),
        ({"messages": [{"role": "user", "content": "x" * 20_001}, *USER]}, 400, "messages.0.content"),
        (
            {"messages": [{"role": "user", "content": [{"type": "text", "text": "x" * 20_001}]}, *USER]},
            400,
            "at most 20000 characters",
        ),
        ({"messages": USER, "n": 2}, 400, "n"),
        ({"messages": USER, "stop": ["a", "b", "c", "d", "e"]}, 400, "stop"),
        ({"messages": USER, "stop": [""]}, 400, "stop"),
        ({"messages": USER, "seed": "7"}, 400, "seed"),
        ({"messages": USER, "response_format": {"type": "yaml"}}, 400, "response_format"),
        ({"messages": USER, "temperature": "0.5"}, 400, "temperature"),
        ({"messages": USER, "temperature": 3}, 400, "temperature"),
        ({"messages": USER, "max_tokens": 0}, 400, "max_tokens"),
        ({"messages": USER, "max_tokens": 1.5}, 400, "max_tokens"),
        ({"messages": USER, "max_completion_tokens": 100_000}, 400, "max_completion_tokens"),
        ({"messages": USER, "stream": "yes"}, 400, "stream"),
        ({"messages": USER, "stream_options": {"include_usage": 1}}, 400, "stream_options.include_usage"),
        ({"messages": USER, "model": 7}, 400, "model"),
        ({"messages": USER, "model": "gpt-4o"}, 404, "gpt-4o"),
        ([USER], 400, "body"),
        ("hello", 400, "body"),
    ],
)
def test_bad_requests_get_4xx_naming_the_field(
    live_server: LiveServer, payload: Any, status: int, names: str
) -> None:
    r = httpx.post(live_server.url + CHAT, json=payload, timeout=60)
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert names in error["message"] and error["type"] and "code" in error


def test_malformed_undecodable_and_oversize_bodies(live_server: LiveServer) -> None:
    url = live_server.url + CHAT
    headers = {"content-type": "application/json"}
    r = httpx.post(url, content=b'{"messages": [', headers=headers)
    assert r.status_code == 400 and "JSON" in r.json()["error"]["message"]
    r = httpx.post(url, content=b'{"messages": [{"role": "user", "content": "caf\xe9"}]}', headers=headers)
    assert r.status_code == 400 and "UTF-8" in r.json()["error"]["message"]

    big = b'{"messages": [{"role": "user", "content": "' + b"x" * 2_000_000 + b'"}]}'
    r = httpx.post(url, content=big, headers=headers)
    assert r.status_code == 413 and "over the limit" in r.json()["error"]["message"]

    def chunked() -> Iterator[bytes]:  # no Content-Length: Transfer-Encoding: chunked
        for i in range(0, len(big), 64 * 1024):
            yield big[i : i + 64 * 1024]

    r = httpx.post(url, content=chunked(), headers=headers)
    assert "content-length" not in r.request.headers and r.request.headers["transfer-encoding"] == "chunked"
    assert r.status_code == 413 and "over the limit" in r.json()["error"]["message"]
    # A small chunked body is read and answered normally (here: refused for its content).
    r = httpx.post(url, content=iter([b'{"messages": ', b"[]}"]), headers=headers)
    assert r.status_code == 400 and "messages" in r.json()["error"]["message"]
    # /v1/answer is limited the same way.
    r = httpx.post(live_server.url + "/v1/answer", content=chunked(), headers=headers)
    assert r.status_code == 413


def test_wrong_method_and_not_ready(engine: Engine) -> None:
    never_loaded = Engine(engine.settings, models=engine.models)
    with LiveServer(create_app(engine.settings, engine=never_loaded, load_on_start=False)) as server:
        assert httpx.get(server.url + CHAT).status_code == 405
        r = httpx.post(server.url + CHAT, json={"messages": USER})
        assert r.status_code == 503 and r.headers["retry-after"] == "5"
        r = httpx.post(server.url + CHAT, json={"messages": USER, "stream": True})
        assert r.status_code == 503 and r.headers["content-type"] == "application/json"


UNSERVED_ASKS = [
    ("tools", [{"type": "function", "function": {"name": "f", "parameters": {}}}]),
    ("tool_choice", "required"),
    ("logprobs", True),
    ("top_logprobs", 3),
    ("logit_bias", {"50256": -100}),
    ("presence_penalty", 0.5),
    ("frequency_penalty", 1.0),
    ("top_p", 0.9),
    ("modalities", ["text", "audio"]),
    ("response_format", {"type": "json_object"}),
    ("response_format", {"type": "json_schema", "json_schema": {"name": "x", "schema": {}}}),
]


@pytest.mark.parametrize(("field", "value"), UNSERVED_ASKS)
def test_what_ragmend_does_not_serve_is_refused_naming_the_field(
    live_server: LiveServer, field: str, value: Any
) -> None:
    create: Any = client_for(live_server).chat.completions.create  # the fields as raw JSON values
    with pytest.raises(openai.BadRequestError) as e:
        create(model="ragmend", messages=USER, **{field: value})
    assert e.value.code == "unsupported_parameter" and e.value.param == field
    assert field in e.value.message and "not served" in e.value.message
    body = e.value.body
    assert isinstance(body, dict) and body.get("error_class") == "UnsupportedParameter"


def test_neutral_values_of_unserved_fields_are_accepted(no_repair_server: LiveServer) -> None:
    # What clients send by default: asks for nothing, so it is served (no 400).
    create: Any = client_for(no_repair_server).chat.completions.create
    resp = create(
        model="ragmend",
        messages=USER,
        max_tokens=4,
        tools=[],
        logprobs=False,
        presence_penalty=0,
        frequency_penalty=0,
        top_p=1,
        response_format={"type": "text"},
        user="u",
        metadata={"k": "v"},
        store=False,
    )
    assert resp.choices[0].message.content


def test_stop_and_seed_reach_the_generator(no_repair_server: LiveServer) -> None:
    client = client_for(no_repair_server)
    q = sample_questions()[1]["question"]
    free = client.chat.completions.create(model="ragmend", messages=[{"role": "user", "content": q}])
    assert free.model_extra is not None
    text = free.model_extra["ragmend"]["generated"]  # the generator's text, before any note
    assert " " in text.strip()
    # Stopped at its first space: one word, and the stop sequence is not in it.
    stopped = client.chat.completions.create(
        model="ragmend", messages=[{"role": "user", "content": q}], stop=" "
    )
    assert stopped.model_extra is not None
    first = stopped.model_extra["ragmend"]["generated"]
    assert first and " " not in first.strip() and text.startswith(first.strip())
    assert stopped.model_extra and stopped.model_extra["ragmend"]["config"]["stop"] == [" "]

    def sampled(seed: int) -> str:
        r = client.chat.completions.create(
            model="ragmend",
            messages=[{"role": "user", "content": q}],
            temperature=1.5,
            max_tokens=24,
            seed=seed,
        )
        assert r.model_extra is not None
        # The generator's text: what the user reads can be the same abstention for every sample.
        return str(r.model_extra["ragmend"]["generated"])

    # The same seed samples the same answer; across seeds the samples differ.
    assert sampled(1) == sampled(1)
    assert len({sampled(s) for s in (2, 3, 4)}) > 1


@pytest.mark.parametrize("verify_first", [False, True], ids=["live", "verify_first"])
def test_a_live_stream_starts_before_the_request_ends(live_server: LiveServer, verify_first: bool) -> None:
    """Live, the first piece of text arrives while the request is still in flight (its diagnosis
    and any repair still to come: the server counts it as running); verify_first holds the stream
    until the request is done. A repair that replaces the streamed answer follows it as a marked
    correction."""
    body = {
        "messages": [{"role": "user", "content": UNANSWERABLE_QUESTION}],
        "max_tokens": 24,
        "stream": True,
        "stream_options": {"verify_first": verify_first},
    }
    with httpx.stream("POST", live_server.url + CHAT, json=body, timeout=300) as r:
        assert r.status_code == 200
        lines = r.iter_lines()
        first_text = None
        for line in lines:
            if line.startswith("data: {") and json.loads(line[6:])["choices"][0]["delta"].get("content"):
                first_text = json.loads(line[6:])
                break
        running_then = in_flight(live_server)
        rest = [line for line in lines if line]
    assert first_text is not None and rest[-1] == "data: [DONE]"
    assert running_then == (0 if verify_first else 1)
    events = [first_text] + [json.loads(e[6:]) for e in rest[:-1]]
    content = "".join(c["choices"][0]["delta"].get("content") or "" for c in events if c["choices"])
    ext = events[-1]["ragmend"]
    # A live stream's first pass reports its seconds to the generator's first text, within its
    # generation time (verify_first generates unstreamed: null).
    t = ext["timings"]
    if verify_first:
        assert t["first_token_s"] is None
    elif not (ext["repair"] and ext["repair"].get("kept") == "repaired"):
        assert t["first_token_s"] is not None and 0 < t["first_token_s"] <= t["generate_s"]
    if verify_first:
        assert content == ext["answer"]
    elif ext["abstained_by"] and CORRECTION not in content:
        assert is_abstention(content)  # the streamed answer abstained: said once, not corrected
    elif (ext["repair"] and ext["repair"].get("kept") in ("repaired", "abstained", "conflict")) or ext[
        "answer_policy"
    ] in ("abstain", "conflict"):
        # A repaired answer, an abstention or both sides of a conflict (the action's or the answer
        # policy's) follow as a marked correction, led by one line saying what changed and why.
        lead = content.rsplit(f"\n\n{CORRECTION}", 1)[1].removesuffix(ext["answer"])
        assert lead.startswith(("The answer above is withdrawn.", "The answer above is replaced, as "))
        assert "\n" not in lead and content.endswith(ext["answer"])
    else:
        assert content == ext["generated"] + (f" {ext['answer_note']}" if ext["answer_note"] else "")
