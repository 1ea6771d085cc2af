"""Claims that people judged against a long document (../shared/data/hallucination), read into
the grounded shape (corpora/grounded.py): ContractNLI and WiCE. Their documents are long (a
contract is about 10k characters, a cited web page more), so each row's source is the evidence the
label depends on, where the annotators marked it, with a sentence of context either side: a
premise the diagnosis's window would hold.

- contractnli: supported = Entailment; unsupported = Contradiction or NotMentioned, the whole
  hypothesis its span; source: the evidence spans in context (NotMentioned: the contract).
- wice: supported = supported; unsupported = partially or not supported, the claim tokens marked
  not supported its spans; source: the supporting sentences in context (none marked: the page).

Test rows are never read: ContractNLI's test.json; WiCE's test split is not in the shared data, and
its dev split is left for measuring (only train is read).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

from ragmend.corpora.grounded import Grounded, Spans

CONTEXT = 1  # sentences (contract spans) either side of the evidence
CONTRACT_FILES = ("train_truncated.json", "dev.json")


def contractnli(folder: Path) -> Iterator[Grounded]:
    for name in CONTRACT_FILES:
        data = json.loads((folder / name).read_text())
        hypotheses = {key: v["hypothesis"] for key, v in data["labels"].items()}
        for doc in data["documents"]:
            text, spans = doc["text"], [tuple(s) for s in doc["spans"]]
            pieces = [" ".join(text[a:b].split()) for a, b in spans]
            for key, note in doc["annotation_sets"][0]["annotations"].items():
                choice, claim = note["choice"], hypotheses[key]
                evidence = _in_context(pieces, sorted(note["spans"]))
                yield Grounded(
                    id=f"contractnli-{doc['id']}-{key}",
                    set="contractnli",
                    task="claim",
                    question="",
                    source=(evidence or " ".join(text.split()),),
                    response=claim,
                    unsupported=choice != "Entailment",
                    spans=() if choice == "Entailment" else ((0, len(claim)),),
                    group=f"contractnli-{doc['id']}",
                    kind=choice,
                )


def wice(folder: Path) -> Iterator[Grounded]:
    path = folder / "non_supported_tokens" / "train.jsonl"
    for i, line in enumerate(path.read_text().splitlines()):
        if not line.strip():
            continue
        row = json.loads(line)
        claim, label = row["claim"].strip(), row["label"]
        sentences = [" ".join(s.split()) for s in row["evidence"]]
        marked = sorted({j for group in row["supporting_sentences"] for j in group})
        source = _in_context(sentences, marked) or " ".join(sentences)
        unsupported = label != "supported"
        spans = _token_spans(claim, row["claim_tokens"], row["non_supported_spans"]) if unsupported else ()
        yield Grounded(
            id=f"wice-train-{i}",
            set="wice",
            task="claim",
            question="",
            source=(source,),
            response=claim,
            unsupported=unsupported,
            spans=spans if spans else (None if unsupported else ()),
            group=f"wice-{claim[:80]}",
            kind=label,
        )


def _in_context(pieces: Sequence[str], chosen: Sequence[int]) -> str:
    """The chosen pieces with CONTEXT pieces either side, in order, once each."""
    keep = sorted({k for j in chosen for k in range(j - CONTEXT, j + CONTEXT + 1) if 0 <= k < len(pieces)})
    return " ".join(pieces[k] for k in keep if pieces[k])


def _token_spans(claim: str, tokens: Sequence[str], marked: Sequence[bool]) -> Spans:
    """The character ranges of the marked tokens in `claim` (found in order), merged where only
    spaces part them."""
    ranges: list[tuple[int, int]] = []
    at = 0
    for token, bad in zip(tokens, marked, strict=False):
        found = claim.find(token, at)
        if found < 0:
            continue
        at = found + len(token)
        if not bad:
            continue
        if ranges and not claim[ranges[-1][1] : found].strip():
            ranges[-1] = (ranges[-1][0], at)
        else:
            ranges.append((found, at))
    return tuple(ranges)
