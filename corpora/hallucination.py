"""The grounded-hallucination sets of the shared data (../shared/data/hallucination), each read
into one shape: a source, an optional question, a response, whether the source supports it, and,
where the set says so, the response's unsupported character spans.

| set | task shape | supported | unsupported | spans |
|---|---|---|---|---|
| summedits | summary | label 1 | label 0 (an edited summary) | the words that differ from the original |
| begin | dialogue | Fully attributable, Generic | Not fully attributable | unknown |
| faithdial | dialogue | entailment, generic (no hallucination) | any hallucination | unknown |
| factcheck_gpt | claim | completely-support | refute, irrelevant | the whole claim |
| halueval | qa | the right answer | the hallucinated answer | the whole answer |
| q2_wow | dialogue | label 0 | label 1 (inconsistent with the knowledge) | unknown |
| xsum_hallucination, frank, fib | summary | corpora/summaries.py | | |
| contractnli, wice | claim | corpora/grounded_claims.py | | |

Partly supported rows (Factcheck-GPT's partially-support, FaithDial's partial hallucinations
as their own label) are unsupported with the span unknown. Test rows are never read: SummEdits'
`test` rows, BEGIN's test file, FRANK's and ContractNLI's test splits (and the XSum annotations of
FRANK's test articles); WiCE's train split only (its dev is for measuring); the sets without a
split are read whole. Rows whose source shares a
sentence with a HotpotQA paragraph of the evaluation corpus (HaluEval's, Q²'s and WiCE's
Wikipedia text) are dropped (`drop_sentences`), so no evaluated passage is trained on.
"""

from __future__ import annotations

import csv
import difflib
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ragmend.corpora.grounded import Grounded, Spans
from ragmend.corpora.grounded_claims import contractnli, wice
from ragmend.corpora.summaries import fib, frank, xsum_hallucination

HALLUCINATION_DIR = "hallucination"


def read_all(root: Path, drop_sentences: frozenset[str] = frozenset()) -> list[Grounded]:
    """Every non-test row of every set under root/hallucination, in a fixed order, but for rows
    whose source shares a sentence with `drop_sentences` (the evaluation corpus's)."""
    base = root / HALLUCINATION_DIR
    rows = [
        *summedits(base / "summedits"),
        *begin(base / "begin"),
        *faithdial(base / "faithdial_audit"),
        *factcheck_gpt(base / "factcheck_gpt_stance" / "subtask3_claim_evidence_stance.jsonl"),
        *halueval(base / "halueval_qa_samples" / "qa_one-turn_data.json"),
        *q2_wow(base / "q2_wow" / "cross_annotation.csv"),
        *xsum_hallucination(base / "xsum_hallucination", base / "frank"),
        *frank(base / "frank"),
        *fib(base / "fib"),
        *contractnli(base / "contractnli"),
        *wice(base / "wice"),
    ]
    if not drop_sentences:
        return rows
    return [g for g in rows if not any(s in drop_sentences for src in g.source for s in sentences_of(src))]


def summedits(folder: Path) -> Iterator[Grounded]:
    for path in sorted(folder.glob("summedits_*.json")):
        domain = path.stem.removeprefix("summedits_")
        for row in json.loads(path.read_text()):
            if row.get("split") == "test":
                continue
            summary, consistent = row["summary"].strip(), int(row["label"]) == 1
            spans: Spans | None = () if consistent else edited_spans(row.get("original_summary", ""), summary)
            yield Grounded(
                id=f"summedits-{domain}-{row['id']}",
                set="summedits",
                task="summary",
                question="",
                source=(row["doc"].strip(),),
                response=summary,
                unsupported=not consistent,
                spans=spans or (None if not consistent else ()),
                group=f"summedits-{domain}-{row['id'].split('_')[0]}",
                kind=",".join(_listed(row.get("edit_types"))) or ("consistent" if consistent else "edited"),
            )


def begin(folder: Path) -> Iterator[Grounded]:
    for path in sorted(folder.glob("begin_dev_*.tsv")):
        with path.open(newline="") as f:
            for i, row in enumerate(csv.DictReader(f, delimiter="\t")):
                label = row["begin_label"].strip()
                if not row["knowledge"].strip() or not row["response"].strip():
                    continue
                unsupported = label == "Not fully attributable"
                yield _dialogue(
                    "begin",
                    f"{path.stem}-{i}",
                    row["knowledge"],
                    row["message"],
                    row["response"],
                    unsupported,
                    label,
                )


def faithdial(folder: Path) -> Iterator[Grounded]:
    for path in sorted(folder.glob("*/*.csv")):
        gold = path.parent.name == "gold"
        with path.open(newline="") as f:
            for i, row in enumerate(csv.DictReader(f)):
                label = (row["BEGIN"] if gold else row["begin_label"]).strip().lower()
                response = (
                    row["response"] if gold else next(v for k, v in row.items() if k.lower() in _SYSTEMS)
                )
                knowledge = row["evidence"] if gold else row["knowledge"]
                if not label or not knowledge.strip() or not response.strip():
                    continue  # not annotated, or nothing to ground or to judge
                unsupported = "hallucination" in label
                yield _dialogue(
                    "faithdial",
                    f"{path.parent.name}-{path.stem}-{i}",
                    knowledge,
                    row["history"],
                    response,
                    unsupported,
                    label,
                )


_SYSTEMS = frozenset({"ctrl", "doha", "gpt2"})


def _dialogue(
    name: str, key: str, knowledge: str, turn: str, response: str, unsupported: bool, label: str
) -> Grounded:
    response = _tidy(response)
    return Grounded(
        id=f"{name}-{key}",
        set=name,
        task="dialogue",
        question=_tidy(turn),
        source=(_tidy(knowledge),),
        response=response,
        unsupported=unsupported,
        spans=None if unsupported else (),
        group=f"{name}-{_tidy(knowledge)[:80]}",
        kind=label,
    )


def q2_wow(path: Path) -> Iterator[Grounded]:
    """Both systems' responses of every turn (label 1: inconsistent with the knowledge)."""
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            for system in ("dodeca", "memnet"):
                if not row[f"{system}_response"].strip() or not row["knowledge"].strip():
                    continue
                unsupported = row[f"{system}_label"].strip() == "1"
                g = _dialogue(
                    "q2_wow",
                    f"{row['episode_idx']}-{row['round']}-{system}",
                    row["knowledge"],
                    row["message"],
                    row[f"{system}_response"],
                    unsupported,
                    "inconsistent" if unsupported else "consistent",
                )
                yield replace(g, group=f"q2_wow-{row['episode_idx']}")


def factcheck_gpt(path: Path) -> Iterator[Grounded]:
    with path.open() as f:
        for i, line in enumerate(f):
            row = json.loads(line)
            stance, claim = row["stance"], row["claim"].strip()
            unsupported = stance != "completely-support"
            spans: Spans | None = (
                () if not unsupported else None if stance == "partially-support" else ((0, len(claim)),)
            )
            yield Grounded(
                id=f"factcheck_gpt-{i}",
                set="factcheck_gpt",
                task="claim",
                question="",
                source=(row["evidence"].strip(),),
                response=claim,
                unsupported=unsupported,
                spans=spans,
                group=f"factcheck_gpt-{claim[:80]}",
                kind=stance,
            )


def halueval(path: Path) -> Iterator[Grounded]:
    with path.open() as f:
        for i, line in enumerate(f):
            if not line.strip():
                continue
            row = json.loads(line)
            knowledge = row["knowledge"].strip()
            for answer, unsupported in ((row["right_answer"], False), (row["hallucinated_answer"], True)):
                answer = answer.strip()
                yield Grounded(
                    id=f"halueval-{i}-{'hallucinated' if unsupported else 'right'}",
                    set="halueval",
                    task="qa",
                    question=row["question"].strip(),
                    source=(knowledge,),
                    response=answer,
                    unsupported=unsupported,
                    spans=((0, len(answer)),) if unsupported else (),
                    group=f"halueval-{i}",
                    kind="hallucinated" if unsupported else "right",
                )


def sentences_of(text: str) -> list[str]:
    """A text's sentences, whitespace folded: what the overlap check compares."""
    return [" ".join(s.split()) for s in re.split(r"(?<=[.!?])\s*(?=[A-Z])", text) if len(s.split()) >= 5]


def edited_spans(original: str, edited: str) -> Spans:
    """The character ranges of `edited` whose words differ from `original` (inserted or replaced
    words; a deletion marks the word after it), merged where adjacent."""
    if not original.strip():
        return ()
    a, b = original.split(), [(m.start(), m.end()) for m in re.finditer(r"\S+", edited)]
    words = [edited[s:e] for s, e in b]
    spans: list[tuple[int, int]] = []
    for op, _, _, j1, j2 in difflib.SequenceMatcher(a=a, b=words, autojunk=False).get_opcodes():
        if op in ("replace", "insert") and j2 > j1:
            spans.append((b[j1][0], b[j2 - 1][1]))
        elif op == "delete" and j1 < len(b):
            spans.append(b[j1])
    merged: list[tuple[int, int]] = []
    for s, e in sorted(spans):
        if merged and s <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(e, merged[-1][1]))
        else:
            merged.append((s, e))
    return tuple(merged)


def _listed(value: Any) -> Sequence[str]:
    if isinstance(value, list):
        return [str(v) for v in value]
    return re.findall(r"[a-z_]+", str(value or ""))


def _tidy(text: str) -> str:
    """Tokenised dialogue text (" , " and " 's") read as written text."""
    text = re.sub(r"\s+([,.!?;:%)]|'s|n't|'re|'ve|'ll|'d|'m)", r"\1", " ".join(text.split()))
    return text.replace("( ", "(")
