"""The hallucination detector's training data (`ragmend detector data`, `make detector-data`):
the shared grounded-hallucination sets (corpora/hallucination.py) and ragmend's controlled edits
of supported responses, from DEV splits and permissive text only, balanced by task shape, label
and length, split into train and dev by source document. What it holds: DATA_CARD.md beside the
detector's assets (ragmend/assets/detector/).

Supported responses that ragmend builds, each kept as it is and once edited:
- qa: a HotpotQA DEV question, its gold answer as a statement and the supporting sentences, over
  the two gold paragraphs and a distractor;
- claim: a FEVER DEV SUPPORTS claim over its evidence and another claim's (REFUTES claims and
  SufficientFacts' claims whose evidence lost a fact are unsupported as they stand);
- summary and dialogue: the shared sets' supported summaries and dialogue responses;
- qa and summary: RAGTruth's train sample (real generators' answers and summaries with labelled
  spans), but for the sources held out to choose the detector's threshold (corpora/cases.py
  `ragtruth_held`); its supported responses are edited too (long paraphrased answers with one
  detail changed or added: RAGTruth's own hallucinations' shape).

An edit changes one sentence and records where (the character span of what it put there):
`swap_in_source` (an entity for another of its type the source names in another role: two
passages conflated), `swap_outside` (an entity, date or number for one the source never names),
`negation`, `overgeneralise` (a hedge or a few made all), `added` (a sentence from another
source put after one of the response's: a baseless addition). RAGTruth's test split is never
read (it is the evaluation); HotpotQA and FEVER rows are DEV only (corpora/readers.py split_of).
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ragmend.corpora.cases import RAGTRUTH_TRAIN, Case, ragtruth_cases, ragtruth_held, ragtruth_source
from ragmend.corpora.grounded import TASKS, Grounded, Task
from ragmend.corpora.hallucination import read_all, sentences_of
from ragmend.corpora.nli_pairs import EntitySwapper
from ragmend.corpora.readers import (
    HotpotItem,
    hotpotqa_paragraphs,
    load_fever_claims,
    load_hotpotqa,
    load_sufficient_facts,
    one_in,
)
from ragmend.corpora.tasks import FEVER_FILE, HOTPOTQA_FILE, SUFFICIENT_FACTS_FILE
from ragmend.diagnosis.hypotheses import split_sentences
from ragmend.diagnosis.statement import question_statement
from ragmend.fileio import atomic_write_text

EDITS = ("swap_in_source", "swap_outside", "negation", "overgeneralise", "added")
LENGTHS = ((0, 12), (12, 40), (40, 10**9))  # response words: short answer, a few sentences, long
DEV_SHARE = 10  # one source group in ten is dev
# What of a source its entities are read from for a swap (a long transcript's opening is enough).
SWAP_SOURCE_CHARS = 4000


@dataclass(frozen=True)
class Edit:
    text: str
    span: tuple[int, int]
    kind: str


@dataclass(frozen=True)
class DetectorData:
    train: list[Grounded]
    dev: list[Grounded]

    def stats(self) -> dict[str, Any]:
        return {name: _stats(rows) for name, rows in (("train", self.train), ("dev", self.dev))}


def build(
    root: Path, nlp: Any, seed: int = 0, per_task: int = 4000, limit: int | None = None
) -> DetectorData:
    """Every row, balanced (`balance`) and split by source group. `limit` caps the HotpotQA and
    FEVER DEV items read (a quick build)."""
    rng = random.Random(seed)
    hotpot = load_hotpotqa(root / HOTPOTQA_FILE, split="dev")[:limit]
    claims = load_fever_claims(root / FEVER_FILE, split="dev")[:limit]
    insufficient = load_sufficient_facts(root / SUFFICIENT_FACTS_FILE, split="dev")[:limit]
    evaluated = frozenset(
        s for p in hotpotqa_paragraphs(load_hotpotqa(root / HOTPOTQA_FILE)) for s in sentences_of(p.text)
    )
    shared = read_all(root, drop_sentences=evaluated)
    trained = [c for c in ragtruth_cases(root / RAGTRUTH_TRAIN, "train") if not ragtruth_held(c)]
    built = [
        *hotpot_responses(hotpot, rng),
        *fever_responses(claims, insufficient, rng),
        *(ragtruth_response(c) for c in trained),
    ]
    pool: dict[str, list[str]] = {}
    for g in [*built, *shared]:
        pool.setdefault(g.set, []).extend(s for src in g.source for s in split_sentences(src)[:20])
    swapper = EntitySwapper(nlp, [p for item in hotpot for _, p in item.context][:3000], seed=seed)
    supported = [g for g in [*built, *shared] if not g.unsupported and g.set != "halueval"]
    edited = [e for g in supported if (e := edit_response(g, swapper, pool, rng)) is not None]
    rows = balance([*built, *shared, *edited], per_task, rng)
    dev = [g for g in rows if one_in(g.group, DEV_SHARE)]
    return DetectorData([g for g in rows if not one_in(g.group, DEV_SHARE)], dev)


def hotpot_responses(items: Sequence[HotpotItem], rng: random.Random) -> list[Grounded]:
    out = []
    for item in items:
        answer = item.answer.strip().rstrip(".")
        facts = [s for _, _, s in item.supporting_sentences()]
        if answer.lower() in {"yes", "no", ""} or not facts:
            continue
        gold = [p for t, p in item.context if t in item.supporting_titles]
        others = [p for t, p in item.context if t not in item.supporting_titles]
        source = [*gold, *rng.sample(others, min(1, len(others)))]
        rng.shuffle(source)
        statement = question_statement(item.question, answer)
        if statement.startswith("The answer to the question"):
            statement = f"{answer}."  # the template reads as no one writes; the answer alone does
        response = " ".join([statement, *facts[:2]])
        out.append(
            Grounded(
                id=f"hotpot-{item.id}",
                set="hotpot",
                task="qa",
                question=item.question,
                source=tuple(source),
                response=response,
                unsupported=False,
                spans=(),
                group=f"hotpot-{item.id}",
                kind="gold",
            )
        )
    return out


RAGTRUTH_TASKS: dict[str, Task] = {"QA": "qa", "Summary": "summary", "Data2txt": "data2txt"}


def ragtruth_response(case: Case) -> Grounded:
    """A RAGTruth train-sample response as a training row (with the question evaluation reads),
    grouped by the source it answers."""
    return Grounded(
        id=f"ragtruth-{case.id}",
        set="ragtruth",
        task=RAGTRUTH_TASKS[case.group],
        question=case.query,
        source=tuple(p.text for p in case.passages),
        response=case.response,
        unsupported=case.unsupported,
        spans=None if case.unsupported and not case.spans else case.spans,
        group=f"ragtruth-{ragtruth_source(case)}",
        kind="labelled",
    )


def fever_responses(claims: Sequence[Any], insufficient: Sequence[Any], rng: random.Random) -> list[Grounded]:
    out = []
    for i, c in enumerate([*claims, *insufficient]):
        other = claims[rng.randrange(len(claims))] if claims else c
        source = (c.evidence_text, other.evidence_text) if other is not c else (c.evidence_text,)
        unsupported = c.label != "SUPPORTS"
        spans = ((0, len(c.claim)),) if unsupported else ()
        kind = {"SUPPORTS": "supports", "REFUTES": "refutes"}.get(c.label, "insufficient")
        out.append(
            Grounded(
                id=f"fever-{i}",
                set="fever",
                task="claim",
                question="",
                source=source,
                response=c.claim,
                unsupported=unsupported,
                spans=spans,
                group=f"fever-{c.claim}",
                kind=kind,
            )
        )
    return out


def edit_response(
    g: Grounded, swapper: EntitySwapper, pool: dict[str, list[str]], rng: random.Random
) -> Grounded | None:
    """The response with one sentence edited (the first of the edits, in a random order, that
    applies), unsupported at the edit's span; None when none applies."""
    sentences = [(m.start(), m.end()) for m in re.finditer(r"[^.!?]+[.!?]*", g.response) if m.group().strip()]
    if not sentences:
        return None
    start, end = sentences[rng.randrange(len(sentences))]
    sentence = g.response[start:end]
    source = " ".join(g.source)[:SWAP_SOURCE_CHARS]
    edits: dict[str, Callable[[], Edit | None]] = {
        "swap_in_source": lambda: _swap(swapper.swap_within(sentence, source, rng), "swap_in_source"),
        "swap_outside": lambda: _swap(swapper.swap(sentence, avoid=source), "swap_outside"),
        "negation": lambda: negate(sentence),
        "overgeneralise": lambda: overgeneralise(sentence),
    }
    order = list(edits)
    rng.shuffle(order)
    for kind in order:
        if (e := edits[kind]()) is not None:
            text = g.response[:start] + e.text + g.response[end:]
            span = (start + e.span[0], start + e.span[1])
            return _edited(g, text, span, kind)
    added = on_topic(g, pool.get(g.set, []), rng)
    if added is None:
        return None
    # After any of its sentences: a generator's baseless detail is as often mid-answer as last.
    e = insert_sentence(g.response, rng.choice([end for _, end in sentences]), added)
    return _edited(g, e.text, e.span, "added")


def insert_sentence(response: str, at: int, sentence: str) -> Edit:
    """`sentence` put into `response` at character `at` (a sentence's end), one space either side.

    >>> insert_sentence("Paris is big. It is old.", 13, "It has a tower.").text
    'Paris is big. It has a tower. It is old.'
    """
    head, tail = response[:at].rstrip(), response[at:].strip()
    text = f"{head} {sentence}" + (f" {tail}" if tail else "")
    return Edit(text, (len(head) + 1, len(head) + 1 + len(sentence)), "added")


ADDED_DRAWS = 200  # sentences of the same set weighed for an added sentence


def on_topic(g: Grounded, sentences: Sequence[str], rng: random.Random) -> str | None:
    """A sentence from another source of the same set sharing most content words with the
    response (an addition on the topic, as a generator's baseless addition is), none of its
    source's sentences; None when none shares a word."""
    said = content_words(g.response)
    source = " ".join(g.source)
    draws = [rng.choice(sentences) for _ in range(ADDED_DRAWS)] if sentences else []
    scored = [
        (len(said & content_words(x)), x) for x in draws if 4 <= len(x.split()) <= 40 and x not in source
    ]
    best = max(scored, default=(0, ""), key=lambda t: t[0])
    return best[1] if best[0] > 0 else None


def content_words(text: str) -> set[str]:
    """Words of four letters or more, but for the commonest: what a text is about."""
    return {w for w in re.findall(r"[a-z]{4,}", text.lower()) if w not in _COMMON}


_COMMON = frozenset(
    {"that", "this", "with", "from", "have", "were", "which", "their", "there", "about", "would", "these"}
)


def _edited(g: Grounded, text: str, span: tuple[int, int], kind: str) -> Grounded:
    return replace(
        g, id=f"{g.id}-{kind}", set="edit", response=text, unsupported=True, spans=(span,), kind=kind
    )


def _swap(s: Any, kind: str) -> Edit | None:
    return None if s is None else Edit(s.text, (s.at, s.at + len(s.new)), kind)


# Auxiliaries only: "has", "had" and "have" are as often the verb itself ("have not markings").
_NEGATABLE = re.compile(r"\b(is|was|are|were|can|will|could|would|does|did)\b(?! not\b)")
_NEGATED = re.compile(
    r"\b(is|was|are|were|has|had|have|can|will|could|would|does|did) not\b|\b(isn't|wasn't|didn't|doesn't)\b"
)


def negate(sentence: str) -> Edit | None:
    """The first auxiliary negated ("was" -> "was not"), or a negation removed ("was not" ->
    "was"); the span is the changed words.

    >>> negate("Paris is the capital.")
    Edit(text='Paris is not the capital.', span=(6, 12), kind='negation')
    """
    if m := _NEGATED.search(sentence):
        aux = m.group(1) or {"isn't": "is", "wasn't": "was", "didn't": "did", "doesn't": "does"}[m.group(2)]
        return Edit(
            sentence[: m.start()] + aux + sentence[m.end() :], (m.start(), m.start() + len(aux)), "negation"
        )
    if m := _NEGATABLE.search(sentence):
        said = f"{m.group(1)} not"
        return Edit(
            sentence[: m.start()] + said + sentence[m.end() :], (m.start(), m.start() + len(said)), "negation"
        )
    return None


_GENERALISE = {
    "some": "all",
    "several": "all",
    "many": "all",
    "most": "all",
    "often": "always",
    "sometimes": "always",
    "usually": "always",
    "may": "will",
    "might": "will",
    "about": "exactly",
    "around": "exactly",
    "nearly": "exactly",
    "approximately": "exactly",
}
_HEDGES = ("about", "around", "nearly", "approximately")
# A hedge on a number ("about 300"), or a part of a whole ("some", "several", "many" as words of
# their own): elsewhere "about" and "around" are prepositions.
_GENERALISABLE = re.compile(
    r"\b(?:(" + "|".join(_HEDGES) + r")(?= \$?\d)|(" + "|".join(set(_GENERALISE) - set(_HEDGES)) + r"))\b",
    re.I,
)


def overgeneralise(sentence: str) -> Edit | None:
    """A hedge or a part made absolute ("some" -> "all", "about" -> "exactly").

    >>> overgeneralise("Some birds can fly.").text
    'All birds can fly.'
    """
    m = _GENERALISABLE.search(sentence)
    if m is None:
        return None
    old = m.group(0)
    new = _GENERALISE[old.lower()]
    new = new[:1].upper() + new[1:] if old[0].isupper() else new
    return Edit(
        sentence[: m.start()] + new + sentence[m.end() :], (m.start(), m.start() + len(new)), "overgeneralise"
    )


def balance(rows: Iterable[Grounded], per_task: int, rng: random.Random) -> list[Grounded]:
    """At most `per_task` rows a task shape, half supported and half not where both exist, each
    half drawn evenly across the length bands (LENGTHS) as far as they hold rows."""
    by: dict[tuple[Task, bool, int], list[Grounded]] = {}
    for g in rows:
        by.setdefault((g.task, g.unsupported, _band(g.response)), []).append(g)
    out: list[Grounded] = []
    for task in TASKS:
        for label in (False, True):
            bands = [by.get((task, label, b), []) for b in range(len(LENGTHS))]
            out += _even_draw(bands, per_task // 2, rng)
    rng.shuffle(out)
    return out


def _even_draw(groups: Sequence[list[Grounded]], quota: int, rng: random.Random) -> list[Grounded]:
    """`quota` rows from the groups, as evenly as their sizes allow (a small group gives all it has)."""
    pools = [rng.sample(g, len(g)) for g in groups]
    taken: list[Grounded] = []
    while len(taken) < quota and any(pools):
        for p in pools:
            if p and len(taken) < quota:
                taken.append(p.pop())
    return taken


def _band(text: str) -> int:
    n = len(text.split())
    return next(i for i, (lo, hi) in enumerate(LENGTHS) if lo <= n < hi)


def _stats(rows: Sequence[Grounded]) -> dict[str, Any]:
    return {
        "rows": len(rows),
        "unsupported": sum(g.unsupported for g in rows),
        "with_spans": sum(bool(g.spans) for g in rows if g.unsupported),
        "by_task": dict(
            sorted(
                Counter(f"{g.task} {'unsupported' if g.unsupported else 'supported'}" for g in rows).items()
            )
        ),
        "by_set": dict(sorted(Counter(g.set for g in rows).items())),
        "by_edit": dict(sorted(Counter(g.kind for g in rows if g.set == "edit").items())),
        "by_length": dict(sorted(Counter(f"{LENGTHS[_band(g.response)][0]}+ words" for g in rows).items())),
    }


def write(data: DetectorData, out: Path) -> dict[str, Any]:
    """train.jsonl, dev.jsonl and stats.json in `out` (each written whole, atomically)."""
    for name, rows in (("train", data.train), ("dev", data.dev)):
        lines = "".join(json.dumps(g.as_json(), ensure_ascii=False) + "\n" for g in rows)
        atomic_write_text(out / f"{name}.jsonl", lines)
    stats = data.stats()
    atomic_write_text(out / "stats.json", json.dumps(stats, indent=2) + "\n")
    return stats
