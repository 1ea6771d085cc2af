"""In-domain NLI pairs from the DEV splits of HotpotQA and FEVER (never from TEST).

| source | premise | hypothesis | label |
|---|---|---|---|
| fever_claim | the claim's evidence sentences | the claim | SUPPORTS: entailment, REFUTES: contradiction |
| fever_swap | evidence of a SUPPORTS claim | the claim with one entity swapped | contradiction |
| fever_insufficient | SufficientFacts evidence with a fact removed | the claim | neutral |
| fever_unrelated | the evidence of another claim | the claim | neutral |
| hotpot_support | gold paragraph, ~90 words around the sentence | a supporting sentence | entailment |
| hotpot_swap | a gold paragraph | that sentence with one entity swapped | contradiction |
| hotpot_distractor | a distractor paragraph of the same question | the supporting sentence | neutral |
| hotpot_statement | both gold paragraphs' windows | the question + gold answer as a statement | entailment |
| hotpot_statement_swap | the same | the statement with a wrong answer in the slot | contradiction |
| hotpot_statement_distractor | a distractor paragraph | the statement | neutral |
| hotpot_long_statement* | the three above, up to 200 words (2 gold, 2 distractors) | as above | as above |
| fever_long | evidence, then other pages' evidence to 100 words | the claim | as fever_claim; NEI: neutral |

The long files teach that length is not support: a paragraph-length premise that does
not hold the claim (distractors on the topic, padding from other pages) stays neutral, and one
that contradicts it stays a contradiction however much else it says. The NLI suite's long-premise
set is built by the same functions from the TEST splits.

The statement pairs are the diagnosis' own query-signal pairs (diagnosis/hypotheses.py
`question_statement`: the question with an answer in its slot, judged against the retrieved
passages), built with the gold answer; yes/no answers are left out (their statement is a template
that says nothing the passages could entail).

An entity is swapped for another entity of the same spaCy label seen elsewhere in the data and
absent from the premise, so the swapped statement conflicts with the passage rather than
restating it. All text is CC BY-SA (Wikipedia via FEVER and HotpotQA) or MIT (SufficientFacts
annotations): permissive, so a model trained on it may ship.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragmend.corpora.readers import (
    FEVER_TO_NLI,
    FeverClaim,
    HotpotItem,
    NLIPair,
    load_fever_claims,
    load_hotpotqa,
    load_sufficient_facts,
)
from ragmend.diagnosis.hypotheses import split_sentences
from ragmend.diagnosis.statement import question_statement

# Entity types whose swap changes what a sentence asserts.
SWAP_LABELS = frozenset(
    {
        "PERSON",
        "ORG",
        "GPE",
        "LOC",
        "NORP",
        "FAC",
        "EVENT",
        "WORK_OF_ART",
        "PRODUCT",
        "LANGUAGE",
        "DATE",
        "CARDINAL",
        "QUANTITY",
        "MONEY",
        "PERCENT",
        "ORDINAL",
        "TIME",
    }
)


# Premise length in words for HotpotQA pairs: about a 128-token retrieval chunk, so the premise
# the model is trained on looks like the one the diagnosis gives it and the supporting sentence
# survives truncation (at full length, 22% of them were cut away at 128 tokens).
PREMISE_WORDS = 90
# Long premises (paragraph-length premises must not read as entailment by length). The
# statement pairs' premises at up to 200 words (both gold paragraphs, or two distractors), FEVER
# evidence padded with other claims' evidence to 100 words: the NLI suite's long-premise set is
# built the same way from the TEST splits (bench/suites/nli.py), the training files from DEV.
HOTPOT_PREMISE_WORDS = 200
FEVER_PREMISE_WORDS = 100


@dataclass(frozen=True, kw_only=True)
class Swap:
    text: str
    old: str
    new: str
    label: str
    at: int = 0  # where `new` begins in `text`


class EntitySwapper:
    """Swaps one named entity of a sentence for another of the same type from a pool."""

    def __init__(self, nlp: Any, pool_texts: Iterable[str], seed: int = 0):
        self.nlp = nlp
        self.rng = random.Random(seed)
        pool: dict[str, set[str]] = defaultdict(set)
        for doc in nlp.pipe(pool_texts, batch_size=64):
            for ent in doc.ents:
                if ent.label_ in SWAP_LABELS:
                    pool[ent.label_].add(ent.text.strip())
        self.pool = {label: sorted(texts) for label, texts in pool.items()}

    def swap(self, sentence: str, avoid: str = "") -> Swap | None:
        """`sentence` with one entity replaced, or None when nothing swappable is found."""
        return self.swap_doc(self.nlp(sentence), avoid)

    def alternative(self, span: str, avoid: str = "") -> str | None:
        """Another entity of `span`'s type (an answer's stand-in), absent from `avoid` and `span`.

        The type is spaCy's label for the span read alone, when one entity covers most of it; in a
        sentence spaCy often misses it (titles, lower-case names). None without a swappable type.
        """
        ents = [e for e in self.nlp(span).ents if len(e.text) >= 0.8 * len(span)]
        if not ents or ents[0].label_ not in SWAP_LABELS:
            return None
        blocked = f"{avoid} {span}".lower()
        choices = [t for t in self.pool.get(ents[0].label_, []) if t.lower() not in blocked]
        return self.rng.choice(choices) if choices else None

    def swap_within(self, sentence: str, premise: str, rng: random.Random) -> Swap | None:
        """`sentence` with one named entity replaced by another of its type that `premise` holds
        and the sentence does not: a name the premise gives in another role ("Charles Bronson
        played Captain Jack." -> "Audrey Dalton played Captain Jack." over the cast list naming
        both). None when no entity of the sentence has such a stand-in. `rng` draws it."""
        held: dict[str, set[str]] = defaultdict(set)
        for e in self.nlp(premise).ents:
            if e.label_ in SWAP_LABELS:
                held[e.label_].add(e.text.strip())
        doc = self.nlp(sentence)
        said = doc.text.lower()
        ents = [e for e in doc.ents if e.label_ in SWAP_LABELS]
        rng.shuffle(ents)
        return _first_swap(
            doc,
            ents,
            lambda ent: sorted(
                t
                for t in held[ent.label_]
                if t.lower() not in said
                and ent.text.lower() not in t.lower()
                and t.lower() not in ent.text.lower()
            ),
            rng,
        )

    def swap_doc(self, doc: Any, avoid: str = "") -> Swap | None:
        ents = [e for e in doc.ents if e.label_ in SWAP_LABELS and self.pool.get(e.label_)]
        self.rng.shuffle(ents)
        blocked = (avoid + " " + doc.text).lower()
        return _first_swap(
            doc, ents, lambda ent: [t for t in self.pool[ent.label_] if t.lower() not in blocked], self.rng
        )


def _first_swap(
    doc: Any, ents: Sequence[Any], stand_ins: Callable[[Any], list[str]], rng: random.Random
) -> Swap | None:
    """`doc` with the first of `ents` (in the order given) that has a stand-in replaced by one
    drawn from its `stand_ins`; None when none has."""
    for ent in ents:
        choices = stand_ins(ent)
        if choices:
            new = rng.choice(choices)
            return Swap(
                text=doc.text[: ent.start_char] + new + doc.text[ent.end_char :],
                old=ent.text,
                new=new,
                label=ent.label_,
                at=ent.start_char,
            )
    return None


def fever_pairs(
    claims: list[FeverClaim], insufficient: list[FeverClaim], swapper: EntitySwapper, seed: int = 0
) -> dict[str, list[NLIPair]]:
    rng = random.Random(seed)
    out: dict[str, list[NLIPair]] = defaultdict(list)
    for i, c in enumerate(claims):
        premise = c.evidence_text
        out["fever_claim"].append(
            NLIPair(premise=premise, hypothesis=c.claim, label=FEVER_TO_NLI[c.label], id=f"fever-{i}")
        )
        if c.label == "SUPPORTS" and (s := swapper.swap(c.claim, avoid=premise)):
            out["fever_swap"].append(
                NLIPair(premise=premise, hypothesis=s.text, label="contradiction", id=f"fever-swap-{i}")
            )
        other = claims[rng.randrange(len(claims))]
        if other.evidence and {t for t, _ in other.evidence}.isdisjoint(t for t, _ in c.evidence):
            out["fever_unrelated"].append(
                NLIPair(
                    premise=other.evidence_text, hypothesis=c.claim, label="neutral", id=f"fever-unrel-{i}"
                )
            )
    for i, c in enumerate(insufficient):
        out["fever_insufficient"].append(
            NLIPair(premise=c.evidence_text, hypothesis=c.claim, label="neutral", id=f"fever-nei-{i}")
        )
    return dict(out)


def hotpot_pairs(items: list[HotpotItem], swapper: EntitySwapper, seed: int = 0) -> dict[str, list[NLIPair]]:
    rng = random.Random(seed)
    out: dict[str, list[NLIPair]] = defaultdict(list)
    for item in items:
        distractors = [(t, p) for t, p in item.context if t not in item.supporting_titles]
        for j, (title, paragraph, sentence) in enumerate(item.supporting_sentences(PREMISE_WORDS)):
            if len(sentence) < 20:
                continue  # fragments ("He was born in 1952.") say too little alone
            premise = f"{title}: {paragraph}"
            key = f"{item.id}-{j}"
            out["hotpot_support"].append(
                NLIPair(premise=premise, hypothesis=sentence, label="entailment", id=f"hotpot-{key}")
            )
            if s := swapper.swap(sentence, avoid=paragraph):
                out["hotpot_swap"].append(
                    NLIPair(
                        premise=premise, hypothesis=s.text, label="contradiction", id=f"hotpot-swap-{key}"
                    )
                )
            if distractors:
                out["hotpot_distractor"].append(
                    NLIPair(
                        premise=_distractor(rng, distractors),
                        hypothesis=sentence,
                        label="neutral",
                        id=f"hotpot-dis-{key}",
                    )
                )
    return dict(out)


def hotpot_statement_pairs(
    items: list[HotpotItem],
    swapper: EntitySwapper,
    seed: int = 0,
    premise_words: int = PREMISE_WORDS,
    distractors: int = 1,
) -> dict[str, list[NLIPair]]:
    """The statement pairs of the table above. A premise is about `premise_words` words: half of
    it from each gold paragraph, and the neutral premise `distractors` distractor paragraphs
    (drawn without repeats) sharing it. The defaults build the training files; the NLI suite's
    long-premise set (bench/suites/nli.py) asks for longer premises and two distractors."""
    rng = random.Random(seed)
    out: dict[str, list[NLIPair]] = defaultdict(list)
    answers = sorted({_answer(i) for i in items} - {"yes", "no", ""})
    for item in items:
        if (answer := _answer(item)).lower() in {"yes", "no", ""}:
            continue
        # One window per gold paragraph, half the usual length each: together about one chunk.
        # Items with paragraph-level facts only give the paragraph's opening instead.
        windows = {t: w for t, w, _ in item.supporting_sentences(premise_words // 2)}
        for t, p in item.context:
            if t in item.supporting_titles and t not in windows:
                windows[t] = " ".join(p.split()[: premise_words // 2])
        if len(windows) < 2:
            continue  # a multi-hop statement needs both paragraphs to be entailed
        premise = " ".join(f"{t}: {w}" for t, w in windows.items())
        statement = question_statement(item.question, item.answer)
        key = item.id
        out["hotpot_statement"].append(
            NLIPair(premise=premise, hypothesis=statement, label="entailment", id=f"hotpot-st-{key}")
        )
        # A wrong answer in the slot: an entity of the answer's type, else another question's answer
        # (spaCy types only about half of HotpotQA's answers read alone).
        wrong = swapper.alternative(answer, avoid=f"{premise} {item.question}")
        if wrong is None:
            blocked = f"{premise} {item.question} {answer}".lower()
            others = [a for a in answers if a.lower() not in blocked]
            wrong = rng.choice(others) if others else None
        if wrong is not None:
            out["hotpot_statement_swap"].append(
                NLIPair(
                    premise=premise,
                    hypothesis=question_statement(item.question, wrong),
                    label="contradiction",
                    id=f"hotpot-st-swap-{key}",
                )
            )
        off_gold = [(t, p) for t, p in item.context if t not in item.supporting_titles]
        if off_gold:
            neutral = _distractor(rng, off_gold, distractors, premise_words // distractors)
            out["hotpot_statement_distractor"].append(
                NLIPair(premise=neutral, hypothesis=statement, label="neutral", id=f"hotpot-st-dis-{key}")
            )
    return dict(out)


def fever_long_premise_pairs(
    claims: Sequence[FeverClaim],
    insufficient: Sequence[FeverClaim],
    seed: int = 0,
    min_words: int = FEVER_PREMISE_WORDS,
) -> list[NLIPair]:
    """FEVER claims against their evidence followed by distractor evidence: that of other claims
    (drawn from `claims`, seeded) on pages other than the premise's so far, appended until the
    premise has `min_words` words. SUPPORTS -> entailment, REFUTES -> contradiction, and the
    SufficientFacts NOT ENOUGH claims (`insufficient`) -> neutral."""
    rng = random.Random(seed)
    pairs = []
    for prefix, group in (("fever-long", claims), ("fever-long-nei", insufficient)):
        for i, c in enumerate(group):
            premise, titles = c.evidence_text, {t for t, _ in c.evidence}
            for _ in range(50 if claims else 0):  # enough draws for min_words; a small pool stops short
                if len(premise.split()) >= min_words:
                    break
                other = claims[rng.randrange(len(claims))]
                if other.evidence and titles.isdisjoint(t for t, _ in other.evidence):
                    premise += " " + other.evidence_text
                    titles |= {t for t, _ in other.evidence}
            pairs.append(
                NLIPair(premise=premise, hypothesis=c.claim, label=FEVER_TO_NLI[c.label], id=f"{prefix}-{i}")
            )
    return pairs


def _distractor(
    rng: random.Random, distractors: list[tuple[str, str]], n: int = 1, words: int = PREMISE_WORDS
) -> str:
    """`n` distractor paragraphs (fewer where the item has fewer) joined as a premise, each cut
    to `words` words: the length of the gold premises."""
    chosen = [rng.choice(distractors)] if n == 1 else rng.sample(distractors, min(n, len(distractors)))
    return " ".join(f"{title}: {' '.join(paragraph.split()[:words])}" for title, paragraph in chosen)


def swap_within_pairs(
    items: Sequence[HotpotItem], claims: Sequence[FeverClaim], swapper: EntitySwapper, seed: int = 0
) -> dict[str, list[NLIPair]]:
    """Names swapped within the premise: a HotpotQA supporting sentence with one named entity
    replaced by another of its type that its own paragraph holds, against that paragraph (cut as
    in `hotpot_pairs`), and a FEVER SUPPORTS claim with one replaced by another that its evidence
    holds: contradiction. The other swap files draw the stand-in from a pool and never from the
    premise ("avoid"), so a model trained on them learns that a name the premise holds is
    support, wherever the premise holds it: the shipped model entails these swaps as readily as
    the true sentences (docs/nli.md, "Names in another role"). A seeded draw of its own, so the
    other files are as they were."""
    rng = random.Random(seed)
    out: dict[str, list[NLIPair]] = defaultdict(list)
    for item in items:
        for j, (title, paragraph, sentence) in enumerate(item.supporting_sentences(PREMISE_WORDS)):
            if len(sentence) >= 20 and (s := swapper.swap_within(sentence, paragraph, rng)):
                premise = f"{title}: {paragraph}"
                out["hotpot_swap_within"].append(
                    NLIPair(
                        premise=premise,
                        hypothesis=s.text,
                        label="contradiction",
                        id=f"hotpot-within-{item.id}-{j}",
                    )
                )
    for i, c in enumerate(claims):
        if c.label == "SUPPORTS" and (s := swapper.swap_within(c.claim, c.evidence_text, rng)):
            out["fever_swap_within"].append(
                NLIPair(
                    premise=c.evidence_text, hypothesis=s.text, label="contradiction", id=f"fever-within-{i}"
                )
            )
    return dict(out)


def _answer(item: HotpotItem) -> str:
    return item.answer.strip().rstrip(".").strip()


def build_in_domain_pairs(
    data_root: Path, nlp: Any, seed: int = 0, limit: int | None = None
) -> dict[str, list[NLIPair]]:
    """Every in-domain source above, from the DEV splits only. `limit` caps items per dataset."""
    hotpot = load_hotpotqa(data_root / "hotpotqa" / "hotpot_dev_distractor_merged.json", split="dev")[:limit]
    claims = load_fever_claims(data_root / "fever" / "fever_claims_with_evidence_text.jsonl", split="dev")[
        :limit
    ]
    insufficient = load_sufficient_facts(data_root / "fever" / "sufficientfacts_fever.jsonl", split="dev")[
        :limit
    ]
    pool = [c.claim for c in claims] + [s for c in claims for _, s in c.evidence]
    pool += [p for item in hotpot for _, p in item.context]
    swapper = EntitySwapper(nlp, pool, seed=seed)
    long = hotpot_statement_pairs(
        hotpot, swapper, seed=seed + 1, premise_words=HOTPOT_PREMISE_WORDS, distractors=2
    )
    return (
        fever_pairs(claims, insufficient, swapper, seed=seed)
        | hotpot_pairs(hotpot, swapper, seed=seed)
        | hotpot_statement_pairs(hotpot, swapper, seed=seed)
        | {k.replace("hotpot_", "hotpot_long_"): _retag(v, "long") for k, v in long.items()}
        | {"fever_long": fever_long_premise_pairs(claims, insufficient, seed=seed)}
        | swap_within_pairs(hotpot, claims, swapper, seed=seed + 2)
    )


def _retag(pairs: list[NLIPair], tag: str) -> list[NLIPair]:
    """The same pairs with `tag` in their ids (the long files' ids differ from the short ones')."""
    return [
        NLIPair(premise=p.premise, hypothesis=p.hypothesis, label=p.label, id=f"{tag}-{p.id}") for p in pairs
    ]


def lengthen_premises(
    pairs: Sequence[NLIPair], filler: Sequence[str], max_words: int, seed: int = 0
) -> list[NLIPair]:
    """Each pair again with its premise inside unrelated text: sentences of `filler` (paragraphs
    from other sources) before and after it, to a length drawn between the premise's own and
    `max_words` words. The label stands: added text that says nothing about the hypothesis
    neither creates nor removes support. The filler must come from other sources than the pairs'
    (MNLI's and SNLI's own premises describe the same scenes and could entail a hypothesis).
    Ids get "-long"; the premise's position among the fillers is drawn too, so that the model
    cannot learn where the evidence sits."""
    sentences = [s for text in filler for s in split_sentences(text) if len(s.split()) >= 4]
    if not sentences:
        raise ValueError("lengthen_premises needs filler text")
    rng = random.Random(seed)
    out = []
    for p in pairs:
        words = len(p.premise.split())
        target = rng.randint(min(words, max_words), max_words)
        added: list[str] = []
        while words < target:
            added.append(rng.choice(sentences))
            words += len(added[-1].split())
        at = rng.randint(0, len(added))
        premise = " ".join([*added[:at], p.premise, *added[at:]])
        out.append(NLIPair(premise=premise, hypothesis=p.hypothesis, label=p.label, id=f"{p.id}-long"))
    return out
