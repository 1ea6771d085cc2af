"""The generator on an external engine, for real: llama-cpp-python's own OpenAI-compatible server
(`python -m llama_cpp.server`) in a process of its own, over the tiny profile's GGUF, and ragmend
pointed at it through litellm (`openai/<alias>` with api_base). Answers, streaming and usage flow
through that process; nothing of the generator runs inside ragmend's.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
from openai import OpenAI

from ragmend.bench.speed.startup import free_port
from ragmend.engine import Engine
from ragmend.models.generator import generator_source
from ragmend.models.registry import ModelRegistry
from ragmend.server.app import create_app
from ragmend.settings import settings_with
from tests.conftest import LiveServer, sample_questions

ALIAS = "smollm2-remote"


@pytest.fixture(scope="module")
def llama_server(engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """(base URL, log file) of a llama_cpp.server process serving the tiny GGUF."""
    pytest.importorskip("llama_cpp.server.app", reason="llama-cpp-python[server] is not installed")
    _, gguf = generator_source(engine.settings.models.generator, engine.settings.cache_dir)
    port = free_port()
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    cmd = [
        sys.executable, "-m", "llama_cpp.server",
        "--model", gguf, "--model_alias", ALIAS,
        "--host", "127.0.0.1", "--port", str(port),
        "--n_ctx", "2048", "--n_threads", "1", "--verbose", "False",
    ]  # fmt: skip
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env={**os.environ})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited {proc.returncode}: {log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{url}/v1/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"llama_cpp.server did not start: {log.read_text()[-2000:]}")
            time.sleep(0.2)
        yield url, log
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def remote_server(engine: Engine, llama_server: tuple[str, Path]) -> Iterator[LiveServer]:
    """ragmend over the same index and encoders, its generator the other process (repair off, so
    one request is one answer call and its usage is exactly the engine's)."""
    url, _ = llama_server
    generator = {"model": f"openai/{ALIAS}", "api_base": f"{url}/v1", "api_key": "none", "max_tokens": 48}
    # No in-process stronger generator beside it: every answer call goes to the external engine.
    models = {"generator": generator, "escalation": None}
    settings = settings_with(engine.settings, models=models, policy={"repair": False})
    remote = Engine(settings, models=ModelRegistry.sharing(engine.models, settings))
    remote.load()
    with LiveServer(create_app(settings, engine=remote, load_on_start=False)) as server:
        yield server


def _client(server: LiveServer) -> OpenAI:
    return OpenAI(base_url=server.url + "/v1", api_key="unused", timeout=300)


def _engine_calls(log: Path) -> int:
    return log.read_text().count("POST /v1/chat/completions")


def test_answers_and_usage_come_from_the_external_engine(
    remote_server: LiveServer, llama_server: tuple[str, Path]
) -> None:
    _, log = llama_server
    before = _engine_calls(log)
    q = sample_questions()[0]["question"]
    resp = _client(remote_server).chat.completions.create(
        model="ragmend", messages=[{"role": "user", "content": q}], temperature=0
    )
    assert _engine_calls(log) == before + 1  # one answer call, made over HTTP to the engine
    assert resp.choices[0].message.content
    assert resp.usage is not None and resp.usage.completion_tokens > 0 and resp.usage.prompt_tokens > 0
    assert resp.model_extra is not None
    extension = resp.model_extra["ragmend"]
    # Diagnosed like any answer and, with repair off, returned as generated whatever its failure.
    assert extension["diagnosis"] is not None
    assert extension["first_diagnosis"] is None and extension["repair"] is None
    by_purpose = extension["usage"]["by_purpose"]
    assert by_purpose["answer"]["completion_tokens"] == resp.usage.completion_tokens


def test_a_stream_through_the_external_engine(
    remote_server: LiveServer, llama_server: tuple[str, Path]
) -> None:
    _, log = llama_server
    before = _engine_calls(log)
    stream = _client(remote_server).chat.completions.create(
        model="ragmend",
        messages=[{"role": "user", "content": sample_questions()[1]["question"]}],
        temperature=0,
        stream=True,
        stream_options=cast(Any, {"include_usage": True}),
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.strip() and len([c for c in chunks if c.choices and c.choices[0].delta.content]) > 1
    assert _engine_calls(log) == before + 1
    last = [c for c in chunks if c.model_extra and "ragmend" in c.model_extra]
    assert last and last[-1].model_extra is not None and last[-1].model_extra["ragmend"]["diagnosis"]
    usage = [c.usage for c in chunks if c.usage]
    assert usage and usage[-1].completion_tokens > 0


def test_the_escalate_action_answers_with_the_stronger_generator(
    engine: Engine, llama_server: tuple[str, Path], tmp_path: Path
) -> None:
    """The second llama_cpp.server process stands in for a stronger model (a larger model on
    vLLM, an API): the repair pass goes to it, metered and counted in the request's usage."""
    from ragmend.engine.repair import RepairTrace
    from tests.test_repair import UNANSWERABLE

    stronger_model_stand_in, _ = llama_server
    escalation = {"model": f"openai/{ALIAS}", "api_base": f"{stronger_model_stand_in}/v1", "api_key": "none"}
    policy = {
        "enabled_actions": ["escalate"],
        "state_path": str(tmp_path / "policy.sqlite"),
        "latency_budget_s": 300.0,
        "request_latency_budget_s": 600.0,
    }
    # The router off: a first pass already on the stronger model leaves escalate nothing to change.
    settings = settings_with(
        engine.settings, models={"escalation": escalation}, policy=policy, router={"enabled": False}
    )
    escalating = Engine(settings, models=ModelRegistry.sharing(engine.models, settings))
    escalating.load()
    try:
        outcome = escalating.respond(UNANSWERABLE)
        trace = outcome.repair
        assert isinstance(trace, RepairTrace) and trace.action == "escalate"
        assert trace.config.generator == "escalation" and trace.answer.model == f"openai/{ALIAS}"
        assert outcome.first is not None and outcome.first.model != trace.answer.model
        assert trace.cost.latency_s > 0 and trace.answer.completion_tokens > 0
        # The stronger generator's tokens are the request's too.
        assert outcome.usage["repair"].completion_tokens == trace.answer.completion_tokens
    finally:
        escalating.close()
    # Without models.escalation the action is masked, saying why.
    unconfigured = settings_with(engine.settings, models={"escalation": None}, policy=policy)
    plain = Engine(unconfigured, models=ModelRegistry.sharing(engine.models, unconfigured))
    plain.load()
    try:
        skipped = plain.respond(UNANSWERABLE).repair
        assert skipped is not None and not isinstance(skipped, RepairTrace)
        assert [m.reason for m in skipped.masked] == ["needs models.escalation, which is not configured"]
    finally:
        plain.close()


def test_a_failing_engine_s_own_words_stay_in_the_log(engine: Engine) -> None:
    """The engine unreachable: a 502 naming the kind of failure, never its host or its text (a
    provider's message may quote part of a key)."""
    port = free_port()  # nothing listens there
    generator = {"model": "openai/x", "api_base": f"http://127.0.0.1:{port}/v1", "api_key": "sk-secret-123"}
    settings = settings_with(engine.settings, models={"generator": generator, "escalation": None})
    remote = Engine(settings, models=ModelRegistry.sharing(engine.models, settings))
    remote.load()
    with LiveServer(create_app(settings, engine=remote, load_on_start=False)) as server:
        r = httpx.post(
            server.url + "/v1/answer", json={"query": sample_questions(1)[0]["question"]}, timeout=120
        )
    assert r.status_code == 502, r.text
    message = r.json()["error"]["message"]
    assert "failed: InternalServerError" in message and "the server's log has the detail" in message
    assert str(port) not in r.text and "sk-secret" not in r.text and "127.0.0.1" not in r.text
