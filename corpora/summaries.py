"""News summaries that people judged against their article (../shared/data/hallucination), read
into the grounded shape (corpora/hallucination.py `Grounded`): XSum hallucinations, FRANK and FIB.

- xsum_hallucination: unsupported where two of its three annotators marked a common span (the
  spans: the characters two marked); supported otherwise.
- frank: supported where every sentence is free of error (Factuality 1.0); unsupported otherwise,
  a one-sentence summary whole, a longer one with its spans unknown.
- fib: the consistent summary of a pair supported, the inconsistent one not (spans as frank's).

FRANK's published test articles are never read, neither from FRANK nor from the XSum hallucination
annotations of the same articles (FRANK's BBC summaries are those). The three sets share BBC and
CNN/DM articles, so every row's `group` is its article (`bbc-<id>`, `cnndm-<hash>`): one article
stays in one split when they are combined. Summaries are read as written: CNN/DM's `<t>` sentence
tags dropped, escaped quotes unescaped.
"""

from __future__ import annotations

import csv
import json
import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

from ragmend.corpora.grounded import Grounded, Spans

MAJORITY = 2  # of XSum's three annotators


def frank_test_articles(frank: Path) -> frozenset[str]:
    """The article ids of FRANK's published test split."""
    return frozenset((frank / "test_split.txt").read_text().split())


def xsum_hallucination(folder: Path, frank: Path) -> Iterator[Grounded]:
    """Every summary of an article whose text is here (the FRANK folder holds 251 of the 500) and
    that is not a FRANK test article; supported where no two annotators marked a common span."""
    held = frank_test_articles(frank)
    with (folder / "documents.tsv").open(newline="") as f:
        files = {r["bbcid"]: r["document_file"] for r in csv.DictReader(f, delimiter="\t")}
    marks: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)  # (worker, span)
    texts: dict[tuple[str, str], str] = {}
    with (folder / "hallucination_annotations_xsum_summaries.csv").open(newline="") as f:
        for row in csv.DictReader(f):
            key = (row["bbcid"], row["system"])
            texts[key] = _unescape(row["summary"])
            if row["hallucination_type"] != "NULL":
                marks[key].append((row["worker_id"], _unescape(row["hallucinated_span"])))
    for (bbcid, system), summary in sorted(texts.items()):
        if bbcid in held or not files.get(bbcid):
            continue
        article = json.loads((frank.parent / files[bbcid]).read_text())["article"]
        spans = _majority_spans(summary, marks[(bbcid, system)])
        yield Grounded(
            id=f"xsum_hallucination-{bbcid}-{system}",
            set="xsum_hallucination",
            task="summary",
            question="",
            source=(article.strip(),),
            response=summary,
            unsupported=bool(spans),
            spans=spans,
            group=f"bbc-{bbcid}",
            kind="hallucinated" if spans else "faithful",
        )


def frank(folder: Path) -> Iterator[Grounded]:
    """FRANK's validation-split summaries (its test split is never read)."""
    for row in json.loads((folder / "human_annotations.json").read_text()):
        if row["split"] != "valid":
            continue
        article = json.loads((folder / "articles-wbertscore-json" / f"{row['hash']}.json").read_text())
        lines = [_summary(line) for line in article[f"{row['model_name']}_lines"]]
        summary = " ".join(line for line in lines if line)
        unsupported = float(row["Factuality"]) < 1.0
        errors = sorted(k for k in _FRANK_ERRORS if float(row.get(k, 1.0)) < 1.0)
        yield Grounded(
            id=f"frank-{row['hash']}-{row['model_name']}",
            set="frank",
            task="summary",
            question="",
            source=(" ".join(article["article"].split()),),
            response=summary,
            unsupported=unsupported,
            spans=_whole_if_one(summary, len(lines)) if unsupported else (),
            group=f"{'bbc' if row['dataset'] == 'bbc' else 'cnndm'}-{row['hash']}",
            kind=",".join(errors) if unsupported else "factual",
        )


# FRANK's error types (the share of sentences free of each; below 1.0: the summary has one).
_FRANK_ERRORS = ("RelE", "EntE", "CircE", "OutE", "GramE", "CorefE", "LinkE", "Other")


def fib(folder: Path) -> Iterator[Grounded]:
    """Both summaries of every pair, each once per article (the consistent one recurs in every
    distractor file of its article)."""
    seen: set[tuple[str, str]] = set()
    for path in sorted(folder.glob("*/*/*.jsonl")):
        source = path.parent.parent.name  # xsum or cnn_dm
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            article = " ".join(_summary(row["input"]).split())
            for i, choice in enumerate(row["list_choices"]):
                summary = _summary(choice)
                if not summary or (row["id"], summary) in seen:
                    continue
                seen.add((row["id"], summary))
                unsupported = i != int(row["lbl"])
                sentences = summary.count(". ") + 1
                yield Grounded(
                    id=f"fib-{source}-{row['id']}-{len(seen)}",
                    set="fib",
                    task="summary",
                    question="",
                    source=(article,),
                    response=summary,
                    unsupported=unsupported,
                    spans=_whole_if_one(summary, sentences) if unsupported else (),
                    group=f"{'bbc' if source == 'xsum' else 'cnndm'}-{row['id']}",
                    kind=f"{path.parent.name}:{'inconsistent' if unsupported else 'consistent'}",
                )


def _majority_spans(summary: str, marks: list[tuple[str, str]]) -> Spans:
    """The characters of `summary` inside spans of at least MAJORITY annotators (spans are found by
    their text: the stated offsets are often wrong), as merged ranges."""
    votes = [set() for _ in summary]  # type: list[set[str]]
    for worker, span in marks:
        at = summary.find(span) if span else -1
        if at < 0:
            at = summary.lower().find(span.lower()) if span else -1
        if at < 0:
            continue
        for i in range(at, at + len(span)):
            votes[i].add(worker)
    ranges: list[tuple[int, int]] = []
    for i, v in enumerate(votes):
        if len(v) < MAJORITY or summary[i].isspace():
            continue
        if ranges and ranges[-1][1] >= i - 1:
            ranges[-1] = (ranges[-1][0], i + 1)
        else:
            ranges.append((i, i + 1))
    return tuple(ranges)


def _whole_if_one(summary: str, sentences: int) -> Spans | None:
    """A one-sentence summary that has an error is unsupported whole; a longer one: unknown where."""
    return ((0, len(summary)),) if sentences == 1 and summary else None


def _summary(text: str) -> str:
    return " ".join(re.sub(r"</?t>", " ", _unescape(text)).split())


def _unescape(text: str) -> str:
    return text.replace("\\'", "'").replace('\\"', '"')
