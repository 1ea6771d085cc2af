"""Checking an answer ragmend did not write: another system's (question, answer, passages), or its
(question, answer) against a corpus's own retrieval; the same diagnoser every answer of
/v1/answer gets (docs/api.md, "Check any answer").

The passages are judged as given: nothing is cut to fit. What the NLI model could not read whole
(a premise longer than its window) is named in `Checked.truncated`, passage by passage.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from ragmend import cancel
from ragmend.diagnosis.types import Diagnosis, Mode
from ragmend.engine.engine import Engine
from ragmend.engine.events import checked_event
from ragmend.errors import InputError, NotReady
from ragmend.instrumentation import NO_EVENTS, Events
from ragmend.rag.types import Passage

GIVEN = "given"  # the passages' `retriever`: the caller gave them


@dataclass(frozen=True)
class GivenPassage:
    text: str
    id: str | None = None
    title: str = ""
    trust: float | None = None  # its source's trust level in [0, 1]


@dataclass(frozen=True)
class CheckRequest:
    """One answer to check. `passages` None: retrieve them from the engine's corpus for the question."""

    answer: str
    question: str = ""
    passages: tuple[GivenPassage, ...] | None = None
    mode: Mode = "qa"


@dataclass(frozen=True, kw_only=True)
class Checked:
    diagnosis: Diagnosis
    passages: tuple[Passage, ...]  # what was judged against: the given ones, or those retrieved
    retrieved: bool
    truncated: tuple[str, ...]  # ids of passages the NLI model read only in part
    seconds: float
    collection: str | None = None  # the collection whose index the passages came from; None: given


def given_passages(given: Sequence[GivenPassage]) -> tuple[Passage, ...]:
    """The caller's passages as the diagnoser's: ids p1, p2, ... where none is given."""
    out = []
    for i, g in enumerate(given):
        pid = g.id or f"p{i + 1}"
        out.append(
            Passage(id=pid, doc_id=pid, title=g.title, text=g.text, score=0.0, retriever=GIVEN, trust=g.trust)
        )
    return tuple(out)


def check_answer(engine: Engine, request: CheckRequest, events: Events = NO_EVENTS) -> Checked:
    """Diagnose one answer (in the caller's thread; the request's deadline is checked before the
    retrieval and before the diagnosis). Given passages need no index: the diagnosis models load
    on first use; retrieving needs the engine loaded."""
    started = time.perf_counter()
    token = cancel.current()
    if request.passages is not None:
        passages, retrieved = given_passages(request.passages), False
    else:
        if not request.question.strip():
            raise InputError("question: needed to retrieve passages (or send passages)")
        if not engine.ready:
            raise NotReady("ragmend is still loading its models and index")
        token.check("retrieval")
        found, _ = engine.pipeline.retrieve(request.question, engine.config())
        passages, retrieved = tuple(found), True
    token.check("diagnosis")
    with engine.models.turn_on_the_cores("diagnosis"):
        d = engine.diagnoser.diagnose(request.question, passages, request.answer, mode=request.mode)
    collection = engine.namespace if retrieved else None
    checked = Checked(
        diagnosis=d,
        passages=passages,
        retrieved=retrieved,
        truncated=_truncated(d),
        seconds=time.perf_counter() - started,
        collection=collection,
    )
    events.emit(checked_event(checked.diagnosis, checked.seconds))
    return checked


def _truncated(d: Diagnosis) -> tuple[str, ...]:
    ids = {s.passage for signal in (d.e_q, d.e_r) for h in signal.hypotheses for s in h.scores if s.truncated}
    return tuple(sorted(ids - {"joint"}))
