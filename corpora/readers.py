"""The shared data sets (../shared/data), read once, with the fixed dev / test split rule.

One loader per format and one split rule for all of them: no per-dataset copies of either.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

Split = Literal["dev", "test"]


def one_in(key: str, n: int) -> bool:
    """Whether `key` falls in the first of `n` buckets by its sha256 (int(sha256(key), 16) % n == 0):
    a split that keeps every row of one key on one side."""
    return int(hashlib.sha256(key.encode("utf-8")).hexdigest(), 16) % n == 0


def split_of(key: str) -> Split:
    """The data README's rule: dev when int(sha256(key), 16) is even, else test."""
    return "dev" if one_in(key, 2) else "test"


@dataclass(frozen=True)
class Paragraph:
    id: str
    title: str
    text: str

    def as_json(self) -> dict[str, str]:
        return {"id": self.id, "title": self.title, "text": self.text}


@dataclass(frozen=True, kw_only=True)
class HotpotItem:
    id: str
    question: str
    answer: str
    type: str
    level: str
    supporting_titles: tuple[str, ...]
    context: tuple[tuple[str, str], ...]  # (title, paragraph text)
    # (title, sentence index); the index is -1 where only the paragraph is known
    supporting_facts: tuple[tuple[str, int], ...] = ()
    sentences: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (title, its sentences)

    def supporting_sentences(self, max_words: int | None = None) -> list[tuple[str, str, str]]:
        """(title, paragraph, sentence) for each sentence-level supporting fact.

        With `max_words`, the paragraph is cut to the sentences around the supporting one (taken
        alternately after and before it) that fit in that many words: what a retrieval chunk
        holding the sentence shows, and a premise that still contains the fact after an NLI
        model's truncation.
        """
        by_title = dict(self.sentences)
        out = []
        for title, sid in self.supporting_facts:
            sents = by_title.get(title)
            if sents is not None and 0 <= sid < len(sents):
                lo, hi = _sentence_window(sents, sid, max_words) if max_words else (0, len(sents))
                out.append((title, "".join(sents[lo:hi]).strip(), sents[sid].strip()))
        return out

    @property
    def split(self) -> Split:
        return split_of(self.id)


def _sentence_window(sents: Sequence[str], center: int, max_words: int) -> tuple[int, int]:
    lo, hi = center, center + 1
    words = len(sents[center].split())
    grew = True
    while grew:
        grew = False
        for cand in (hi, lo - 1):  # after first: a definition usually precedes what follows it
            if 0 <= cand < len(sents) and not (lo <= cand < hi):
                w = len(sents[cand].split())
                if words + w <= max_words:
                    words += w
                    lo, hi = min(lo, cand), max(hi, cand + 1)
                    grew = True
    return lo, hi


def _maybe_json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def load_hotpotqa(path: Path, split: Split | None = None) -> list[HotpotItem]:
    items = []
    for row in json.loads(Path(path).read_text(encoding="utf-8")):
        raw = _maybe_json(row["context"])
        facts = _maybe_json(row["supporting_facts"])
        item = HotpotItem(
            id=row["_id"],
            question=row["question"],
            answer=row["answer"],
            type=row.get("type", ""),
            level=row.get("level", ""),
            supporting_titles=tuple(dict.fromkeys(t for t, _ in facts)),
            context=tuple((title, "".join(sents).strip()) for title, sents in raw),
            supporting_facts=tuple((t, int(i)) for t, i in facts),
            sentences=tuple((title, tuple(sents)) for title, sents in raw),
        )
        if split is None or item.split == split:
            items.append(item)
    return items


def hotpotqa_paragraphs(items: Iterable[HotpotItem]) -> list[Paragraph]:
    """The pooled, deduplicated context paragraphs; the title is the id (suffixed when reused)."""
    seen: set[tuple[str, str]] = set()
    per_title: dict[str, int] = {}
    out = []
    for item in items:
        for title, text in item.context:
            if (title, text) in seen or not text:
                continue
            seen.add((title, text))
            n = per_title[title] = per_title.get(title, 0) + 1
            out.append(Paragraph(title if n == 1 else f"{title} [{n}]", title, text))
    return out


def write_jsonl(rows: Iterable[Mapping[str, object]], path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
    return n


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:  # parsed JSON: its values are untyped
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


# -- NLI ---------------------------------------------------------------------------------------

NLI_LABELS = ("entailment", "neutral", "contradiction")


@dataclass(frozen=True, kw_only=True)
class NLIPair:
    premise: str
    hypothesis: str
    label: str
    id: str = ""
    # A teacher model's probabilities in NLI_LABELS order (`ragmend nli label`): a soft training
    # target beside `label`, which stays the pair's own (gold or constructed) label.
    probs: tuple[float, float, float] | None = None

    def as_json(self) -> dict[str, object]:
        row: dict[str, object] = {
            "premise": self.premise,
            "hypothesis": self.hypothesis,
            "label": self.label,
            "id": self.id,
        }
        if self.probs is not None:
            row["probs"] = [round(p, 5) for p in self.probs]
        return row


@dataclass(frozen=True)
class NLISet:
    """One file of ../shared/data/nli, with what its license allows (data README)."""

    name: str
    relpath: str
    license: str
    permissive: bool  # may train a model ragmend ships; False: evaluation only


NLI_SETS: tuple[NLISet, ...] = (
    NLISet("mnli_dev_matched", "nli/mnli/dev_matched.jsonl", "MNLI (OANC)", True),
    NLISet("mnli_dev_mismatched", "nli/mnli/dev_mismatched.jsonl", "MNLI (OANC)", True),
    NLISet("snli_dev", "nli/snli/dev.jsonl", "CC BY-SA 4.0", True),
    NLISet("snli_test", "nli/snli/test.jsonl", "CC BY-SA 4.0", True),
    NLISet("cad_snli_train", "nli/cad_snli/train.jsonl", "Apache-2.0", True),
    NLISet("conjnli_adv_train", "nli/conjnli/adv_train.jsonl", "MIT", True),
    NLISet("breaking_nli", "nli/breaking_nli/all.jsonl", "CC BY-SA 4.0", True),
    NLISet("med", "nli/med/all.jsonl", "CC BY-SA 4.0", True),
    NLISet("scitail_dev", "nli/scitail/dev.jsonl", "Apache-2.0", True),
    NLISet("fever_nli_sufficientfacts", "nli/fever_nli/sufficientfacts_eval.jsonl", "CC BY-SA 3.0", True),
    NLISet("fever_symmetric_dev", "nli/fever_symmetric/dev.jsonl", "feversym_DATA_LICENSE", False),
    NLISet("fever_symmetric_test", "nli/fever_symmetric/test.jsonl", "feversym_DATA_LICENSE", False),
    NLISet("anli_dev_r1", "nli/anli/dev_r1.jsonl", "CC BY-NC 4.0", False),
    NLISet("anli_dev_r2", "nli/anli/dev_r2.jsonl", "CC BY-NC 4.0", False),
    NLISet("anli_dev_r3", "nli/anli/dev_r3.jsonl", "CC BY-NC 4.0", False),
    NLISet("xnli_en_test", "nli/xnli_en/test.jsonl", "CC BY-NC 4.0", False),
    NLISet("sick_test", "nli/sick/test.jsonl", "CC BY-NC-SA 3.0", False),
)


def load_nli(path: Path, limit: int | None = None) -> list[NLIPair]:
    """The shared NLI format {premise, hypothesis, label, id, probs?}; a bad row names its line."""
    pairs = []
    for n, row in enumerate(read_jsonl(Path(path)), start=1):
        label = str(row.get("label", "")).lower()
        if (
            label not in NLI_LABELS
            or not isinstance(row.get("premise"), str)
            or not isinstance(row.get("hypothesis"), str)
        ):
            raise ValueError(f"{path}:{n}: expected premise, hypothesis and a label in {NLI_LABELS}")
        probs = _soft_label(row.get("probs"), f"{path}:{n}")
        pairs.append(
            NLIPair(
                premise=row["premise"],
                hypothesis=row["hypothesis"],
                label=label,
                id=str(row.get("id", n)),
                probs=probs,
            )
        )
        if limit is not None and len(pairs) >= limit:
            break
    return pairs


def _soft_label(value: object, where: str) -> tuple[float, float, float] | None:
    if value is None:
        return None
    numbers = isinstance(value, list) and all(isinstance(v, int | float) for v in value)
    probs = [float(v) for v in value] if isinstance(value, list) and numbers else []
    if len(probs) != 3 or min(probs) < 0 or abs(sum(probs) - 1.0) > 1e-3:
        raise ValueError(f"{where}: 'probs' must be three probabilities in {NLI_LABELS} order summing to 1")
    return (probs[0], probs[1], probs[2])


# -- FEVER -------------------------------------------------------------------------------------

FEVER_TO_NLI = {
    "SUPPORTS": "entailment",
    "REFUTES": "contradiction",
    "NOT ENOUGH": "neutral",
    "NOT ENOUGH INFO": "neutral",
}


@dataclass(frozen=True)
class FeverClaim:
    claim: str
    label: str  # SUPPORTS | REFUTES | NOT ENOUGH INFO
    evidence: tuple[tuple[str, str], ...]  # (title, sentence)

    @property
    def split(self) -> Split:
        return split_of(self.claim)

    @property
    def evidence_text(self) -> str:
        return " ".join(f"{title}: {sentence}" for title, sentence in self.evidence)


def load_fever_claims(path: Path, split: Split | None = None) -> list[FeverClaim]:
    """fever_claims_with_evidence_text.jsonl: SUPPORTS / REFUTES claims with evidence text."""
    out = []
    for row in read_jsonl(Path(path)):
        evidence = tuple((e["title"], e["sentence"]) for e in row["evidence"])
        claim = FeverClaim(str(row["claim"]), str(row["label"]), evidence)
        if split is None or claim.split == split:
            out.append(claim)
    return out


def load_sufficient_facts(path: Path, split: Split | None = None) -> list[FeverClaim]:
    """SufficientFacts items whose evidence, with a fact removed, no longer decides the claim.

    Only `label_after == NOT ENOUGH` items are kept, labelled NOT ENOUGH INFO: the source of
    insufficient-evidence cases. The split is by claim text, as for FEVER.
    """
    out = []
    for row in read_jsonl(Path(path)):
        if row.get("label_after") != "NOT ENOUGH":
            continue
        evidence = tuple((title, sentence) for title, sentence in row["evidence"])
        claim = FeverClaim(str(row["claim"]), "NOT ENOUGH INFO", evidence)
        if split is None or claim.split == split:
            out.append(claim)
    return out
