"""Conversations over real HTTP with the real engine (tiny generator): a follow-up is made
standalone with the earlier turns before retrieval (one counted generator call, none for a first
turn); system and developer messages reach the answer prompt as style instructions after its
grounding rule."""

from __future__ import annotations

import httpx
from openai import OpenAI

from ragmend.engine.coreference import HISTORY_TURN_CHARS, HISTORY_TURNS
from ragmend.engine.services import render_history
from ragmend.models.registry import ModelRegistry
from ragmend.rag.prompts import answer_messages, get_prompt
from ragmend.rag.types import Turn
from ragmend.server.mapping import conversation
from tests.bounded import finishes
from tests.conftest import LiveServer, sample_questions


def test_the_conversation_splits_into_turns_and_instructions() -> None:
    history, notes = conversation(
        [
            ("system", "Answer in French."),
            ("user", "Who founded Marvel?"),
            ("assistant", "Martin Goodman."),
            ("tool", "{}"),
            ("developer", " Be brief. "),
        ]
    )
    assert [t.role for t in history] == ["user", "assistant"]
    assert notes == "Answer in French.\nBe brief."
    assert conversation([("user", "hi")]) == ((Turn(role="user", content="hi"),), None)


def test_the_condensing_prompt_sees_the_last_turns_cut_to_size() -> None:
    turns = [
        Turn(role="user" if i % 2 == 0 else "assistant", content=f"turn {i} " + "x" * 900) for i in range(9)
    ]
    text = render_history(turns)
    lines = text.splitlines()
    assert len(lines) == HISTORY_TURNS and lines[0].startswith("Assistant: turn 3")
    assert all(len(line) <= HISTORY_TURN_CHARS + len("Assistant: ") + 4 for line in lines)


def test_instructions_follow_the_grounding_rule() -> None:
    messages = answer_messages(get_prompt("default"), "Answer in French.", context="[1] x", question="q")
    system = messages[0]["content"]
    assert system.startswith(get_prompt("default").system)  # the grounding rule comes first
    assert system.endswith("Instructions: Answer in French.")
    assert answer_messages(get_prompt("default"), None, context="c", question="q") == get_prompt(
        "default"
    ).messages(context="c", question="q")


def test_a_follow_up_is_condensed_with_the_conversation(live_server: LiveServer) -> None:
    q = sample_questions()[0]
    client = OpenAI(base_url=live_server.url + "/v1", api_key="unused", timeout=300, max_retries=0)
    first = client.chat.completions.create(
        model="ragmend", messages=[{"role": "user", "content": q["question"]}]
    )
    assert first.model_extra is not None
    ext = first.model_extra["ragmend"]
    assert "condense" not in ext["usage"]["by_purpose"] and ext["condensed_from"] is None  # a first turn

    def follow(follow_up: str) -> dict:
        reply = client.chat.completions.create(
            model="ragmend",
            messages=[
                {"role": "system", "content": "Answer in one short sentence."},
                {"role": "user", "content": q["question"]},
                {"role": "assistant", "content": first.choices[0].message.content or ""},
                {"role": "user", "content": follow_up},
            ],
        )
        assert reply.model_extra is not None
        return reply.model_extra["ragmend"]

    # A pronoun the conversation's named entities resolve: replaced, no generator call.
    ext = follow("When was it made?")
    assert ext["condensed_from"] == "When was it made?" and "condense" not in ext["usage"]["by_purpose"]
    assert " it " not in f" {ext['query']} " and ext["query"].startswith("When was ")
    # A reference no pronoun rule resolves: one short generator call, counted.
    follow_up = "And what about the other one?"
    ext = follow(follow_up)
    assert ext["usage"]["by_purpose"]["condense"]["calls"] == 1
    assert ext["config"]["instructions"] == "Answer in one short sentence."
    # The query retrieved, answered and diagnosed is the condensed one; the follow-up as asked
    # is kept beside it when condensing changed it.
    assert ext["query"].strip()
    if ext["query"] != follow_up:
        assert ext["condensed_from"] == follow_up
    else:
        assert ext["condensed_from"] is None
    assert ext["diagnosis"]["e_q"]["hypotheses"]  # diagnosed against the condensed question


def test_answer_endpoint_takes_a_history(live_server: LiveServer) -> None:
    q = sample_questions()[0]
    body = {
        "query": "What about the other one?",
        "history": [
            {"role": "developer", "content": "Be brief."},
            {"role": "user", "content": q["question"]},
            {"role": "assistant", "content": "I don't know."},
        ],
    }
    r = httpx.post(live_server.url + "/v1/answer", json=body, timeout=300)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["usage"]["by_purpose"]["condense"]["calls"] == 1
    assert out["config"]["instructions"] == "Be brief."
    bad = httpx.post(
        live_server.url + "/v1/answer", json={"query": "x", "history": [{"role": "wizard", "content": "x"}]}
    )
    assert bad.status_code == 400 and "history" in bad.json()["error"]["message"]


def test_pronouns_are_resolved_from_the_conversation_entities(registry: ModelRegistry) -> None:
    """engine/coreference.py with the real spaCy model: the entity the last answer added comes
    first; a pronoun with no entity of its kind, or another referring word, is left to the
    generator (None)."""
    from ragmend.engine.coreference import resolve_pronouns
    from ragmend.engine.services import refers_back

    jaspan = [
        Turn(role="user", content="Andrew Jaspan was the co-founder of what not-for-profit media outlet?"),
        Turn(role="assistant", content='Andrew Jaspan was the co-founder of "The Conversation".'),
    ]

    def resolve(question: str, history: list[Turn] = jaspan) -> str | None:
        return resolve_pronouns(question, history, registry.spacy, refers_back)

    assert resolve("When did it launch?") == "When did The Conversation launch?"
    assert resolve("When did he found it?") == "When did Andrew Jaspan found The Conversation?"
    assert resolve("What is its audience?") == "What is The Conversation's audience?"
    elko = [
        Turn(role="user", content="Which airport is located in Elko, Nevada?"),
        Turn(role="assistant", content="Elko Regional Airport is located in Elko, Nevada."),
    ]
    assert resolve("Who owns it?", elko) == "Who owns Elko Regional Airport?"
    assert resolve("What about the other one?") is None  # not a pronoun
    assert resolve("When did that happen to him?") is None  # "that" needs more than a name
    unknown = [
        Turn(role="user", content="Who wrote Hamlet?"),
        Turn(role="assistant", content="I don't know."),
    ]
    assert resolve("When was he born?", unknown) is None  # no person named
    assert resolve("Who wrote Hamlet?") is None  # nothing to resolve
    # Unquoted, the recogniser finds no entity in "The Conversation"; its proper nouns still stand
    # for "it" (never for "he").
    said = "Andrew Jaspan was the co-founder of The Conversation."
    unquoted = [jaspan[0], Turn(role="assistant", content=said)]
    assert resolve("When did he found it?", unquoted) == "When did Andrew Jaspan found The Conversation?"
    outlet = [Turn(role="user", content="Which outlet?"), Turn(role="assistant", content="The Conversation.")]
    assert resolve("When was he born?", outlet) is None
    # A title before a recognised name is part of it, not a thing "it" may stand for (a
    # walkthrough condensed "On which network did it air?" into "... did Judge air?"). The
    # recogniser calls "Freedom Watch" a person; with no thing named, "it" is what the user's
    # question asked about, never the person the answer named.
    watch = [
        Turn(role="user", content="Who hosts Freedom Watch?"),
        Turn(role="assistant", content="Judge Andrew Napolitano hosts Freedom Watch."),
    ]
    assert resolve("On which network did it air?", watch) == "On which network did Freedom Watch air?"
    assert resolve("When was he born?", watch) == "When was Andrew Napolitano born?"


def test_an_answer_as_ragmend_showed_it_is_read_as_said(registry: ModelRegistry) -> None:
    """A chat client sends ragmend's reply back with its citation markers and note: they are
    removed before the follow-up is resolved (spaCy finds no entity in '"The Conversation".[1]')."""
    from ragmend.engine.coreference import resolve_pronouns
    from ragmend.engine.presentation import (
        ABSTENTION_TEXT,
        NOT_ANSWERED,
        NOT_SUPPORTED,
        UNSUPPORTED_MARK,
        correction,
        plain_text,
    )
    from ragmend.engine.services import refers_back

    shown = 'Andrew Jaspan was the co-founder of "The Conversation".[1][3]'
    assert plain_text(shown) == 'Andrew Jaspan was the co-founder of "The Conversation".'
    assert plain_text(f"Elko is in Michigan. {UNSUPPORTED_MARK} It is small.[2] {NOT_SUPPORTED}") == (
        "Elko is in Michigan. It is small."
    )
    assert plain_text(f"Canberra. {UNSUPPORTED_MARK} {NOT_ANSWERED}") == "Canberra."
    assert plain_text("A list [a] stays.") == "A list [a] stays."
    # A live stream's correction replaces the first answer; an abstention names no answer.
    # The line saying what changed and why is not part of what was said.
    assert (
        plain_text(f"Paris is in Italy.\n\n{correction('Paris is in France.[1]', 'WR')}")
        == "Paris is in France."
    )
    assert (
        plain_text(f"Paris.\n\n{correction(ABSTENTION_TEXT + ' What was found: [1] Louvre.')}")
        == ABSTENTION_TEXT
    )
    question = Turn(
        role="user", content="Andrew Jaspan was the co-founder of what not-for-profit media outlet?"
    )
    history = [question, Turn(role="assistant", content=plain_text(shown))]
    resolved = resolve_pronouns("When did he found it?", history, registry.spacy, refers_back)
    assert resolved == "When did Andrew Jaspan found The Conversation?"


def test_a_follow_up_after_a_marked_answer_over_http(live_server: LiveServer) -> None:
    """A chat with a follow-up, as an OpenAI client sends it: the assistant turn is ragmend's reply with
    its citation markers and note; "he" and "it" are resolved from it without a generator call."""
    client = OpenAI(base_url=live_server.url + "/v1", api_key="unused", timeout=300, max_retries=0)
    asked = "Andrew Jaspan was the co-founder of what not-for-profit media outlet?"
    reply = client.chat.completions.create(
        model="ragmend",
        messages=[
            {"role": "user", "content": asked},
            {
                "role": "assistant",
                "content": 'Andrew Jaspan was the co-founder of "The Conversation".[1] '
                "Note: the sources found do not support this answer.",
            },
            {"role": "user", "content": "When did he found it?"},
        ],
    )
    assert reply.model_extra is not None
    ext = reply.model_extra["ragmend"]
    assert ext["query"] == "When did Andrew Jaspan found The Conversation?"
    assert ext["condensed_from"] == "When did he found it?" and "condense" not in ext["usage"]["by_purpose"]


def test_a_long_conversation_is_no_stall_for_pronoun_resolution() -> None:
    """A follow-up after 100 turns of 20,000 characters each (the API's bounds): only the latest
    turns are parsed, from their start, so spaCy never reads the whole conversation."""
    out = finishes(
        "from ragmend.engine.coreference import resolve_pronouns\n"
        "from ragmend.models.registry import ModelRegistry\n"
        "from ragmend.rag.types import Turn\n"
        "from ragmend.settings import Settings\n"
        "parse = ModelRegistry(Settings()).spacy\n"
        "filler = ' '.join(['Alpha Beta went to Gamma City.'] * 700)[:20_000]\n"
        "turns = [Turn(role='user' if i % 2 == 0 else 'assistant', content=filler) for i in range(98)]\n"
        "turns += [Turn(role='user', content='Who founded Marvel Comics?'),\n"
        "          Turn(role='assistant', content='Martin Goodman founded Marvel Comics.')]\n"
        "print(resolve_pronouns('When was he born?', turns, parse, lambda s: False))"
    )
    assert out.strip() == "When was Martin Goodman born?"
