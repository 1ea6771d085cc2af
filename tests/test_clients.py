"""Clients nobody here wrote, against a real ragmend server over HTTP: litellm as a client (its
`openai/` provider with api_base) and llama-index's OpenAILike, plain and streamed, and the
official openai client's async API. What they read is the answer the user reads."""

from __future__ import annotations

import asyncio

import litellm
from llama_index.core.llms import ChatMessage
from llama_index.llms.openai_like import OpenAILike
from openai import AsyncOpenAI

from tests.conftest import LiveServer, sample_questions


def test_litellm_as_a_client(live_server: LiveServer) -> None:
    q = sample_questions()[1]["question"]
    messages = [{"role": "user", "content": q}]
    common = {"model": "openai/ragmend", "api_base": live_server.url + "/v1", "api_key": "unused"}
    resp = litellm.completion(messages=messages, max_tokens=32, timeout=300, **common)
    text = resp.choices[0].message.content
    assert text and text.strip()
    assert resp.usage.prompt_tokens > 0 and resp.usage.completion_tokens > 0
    pieces = [
        c.choices[0].delta.content or ""
        for c in litellm.completion(messages=messages, max_tokens=32, stream=True, timeout=300, **common)
        if c.choices
    ]
    assert len([p for p in pieces if p]) > 1 and "".join(pieces).strip()


def test_llama_index_openai_like(live_server: LiveServer) -> None:
    llm = OpenAILike(
        model="ragmend",
        api_base=live_server.url + "/v1",
        api_key="unused",
        is_chat_model=True,
        max_tokens=32,
        timeout=300,
    )
    q = sample_questions()[2]["question"]
    reply = llm.chat([ChatMessage(role="user", content=q)])
    assert reply.message.content and reply.message.content.strip()
    streamed = list(llm.stream_chat([ChatMessage(role="user", content=q)]))
    assert len(streamed) > 1 and (streamed[-1].message.content or "").strip()


def test_the_official_async_client(live_server: LiveServer) -> None:
    async def ask() -> tuple[str, str]:
        client = AsyncOpenAI(base_url=live_server.url + "/v1", api_key="unused", timeout=300, max_retries=0)
        q = sample_questions()[3]["question"]
        whole = await client.chat.completions.create(
            model="ragmend", messages=[{"role": "user", "content": q}], max_tokens=24
        )
        stream = await client.chat.completions.create(
            model="ragmend", messages=[{"role": "user", "content": q}], max_tokens=24, stream=True
        )
        text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
        return whole.choices[0].message.content or "", text

    whole, streamed = asyncio.run(ask())
    assert whole.strip() and streamed.strip()
