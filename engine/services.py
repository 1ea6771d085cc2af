"""What repair actions may call on (actions.catalogue.RepairServices), backed by the engine."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ragmend.engine.coreference import HISTORY_TURN_CHARS, HISTORY_TURNS, resolve_pronouns
from ragmend.engine.presentation import plain_text
from ragmend.rag.prompts import get_prompt
from ragmend.rag.types import Turn

if TYPE_CHECKING:
    from ragmend.engine.engine import Engine

# A rewrite longer than this many times the query is the model rambling, not a query.
_MAX_GROWTH = 3


# A follow-up that names nothing it needs the conversation for is asked as it is: no call, and
# no chance for a small generator to rewrite a standalone question into something else.
_REFERS_BACK = re.compile(
    r"\b(he|she|it|its|they|them|their|theirs|his|her|hers|him|this|that|these|those|there|"
    r"the same|also|too|then|one|ones|former|latter|else|another|other)\b",
    re.I,
)


def refers_back(query: str) -> bool:
    """Whether a follow-up may need the conversation to be understood (a pronoun, "that", ...)."""
    return bool(_REFERS_BACK.search(query))


def render_history(history: Sequence[Turn]) -> str:
    lines = []
    for turn in history[-HISTORY_TURNS:]:
        text = " ".join(turn.content.split())
        if len(text) > HISTORY_TURN_CHARS:
            text = text[:HISTORY_TURN_CHARS] + " ..."
        lines.append(f"{turn.role.capitalize()}: {text}")
    return "\n".join(lines)


class EngineServices:
    def __init__(self, engine: Engine):
        self._engine = engine

    def rewrite_query(self, query: str, variant: str) -> str:
        """One short generator call; the original query when the rewrite is unusable."""
        template = get_prompt(f"rewrite_{variant}")
        out = self._engine.models.generator.chat(
            template.messages(question=query), max_tokens=64, purpose="rewrite"
        )
        return clean_rewrite(out.text, query)

    def condense_query(self, query: str, history: Sequence[Turn]) -> str:
        """A chat's follow-up made standalone from the conversation, so that "he" and "it" name
        what they refer to before retrieval: its pronouns replaced by the conversation's named
        entities where that resolves them all (engine/coreference.py: no generator call, the
        user's words kept), else one short generator call; the follow-up itself when the rewrite
        is unusable."""
        # An answer of ragmend's comes back marked as it was shown ("[1]", "Note: ..."): read as said.
        history = [
            Turn(role=t.role, content=plain_text(t.content)) if t.role == "assistant" else t for t in history
        ]
        resolved = resolve_pronouns(query, history, self._engine.models.spacy, refers_back)
        if resolved is not None:
            return resolved
        template = get_prompt("condense")
        out = self._engine.models.generator.chat(
            template.messages(history=render_history(history), question=query),
            max_tokens=64,
            purpose="condense",
        )
        return clean_rewrite(out.text, query)

    def refresh_index(self) -> str:
        """Re-ingest the configured sources (incremental; built aside, swapped atomically)."""
        return self._engine.corpus.refresh_index().generation


def clean_rewrite(text: str, query: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    if not lines:
        return query
    line = re.sub(r"^(rewritten( query)?|query|search query)\s*:\s*", "", lines[0], flags=re.I)
    line = line.strip().strip("\"'`").strip()
    if not line or len(line) > _MAX_GROWTH * max(len(query), 20):
        return query
    return line
