"""The comparison check against HotpotQA's own answers (`ragmend bench comparison`).

No generator and no model: each question's gold answer is the response and its ten distractor-
setting paragraphs are the passages. Two things are measured per split:
- choice questions ("Who is older, A or B?"): how often a gold answer, given bare or in a
  sentence, is judged to name neither offered answer (each one a right answer the diagnosis would
  call off the question);
- comparisons in time: how many the passages' dates decide, and how often the decision agrees
  with the gold answer; the other alternative given as the answer must then disagree. With the
  corpus lookup (as the engine runs it), an alternative whose page is not among the item's ten
  paragraphs is dated from its page among all the file's paragraphs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from ragmend.corpora.readers import HotpotItem
from ragmend.diagnosis.choices import offered_choice, picked_alternative
from ragmend.diagnosis.comparison import TitleLookup, check_comparison, title_lookup

# The gold answer as a response, bare and in the two sentence shapes a generator gives.
SHAPES = ("{}", "{} is the answer.", "The answer is {}.")


def corpus_lookup(items: Sequence[HotpotItem]) -> TitleLookup:
    """The engine's title lookup over every paragraph of these items (the corpus an index of the
    file would hold): each alternative's own page, retrieved or not."""
    return title_lookup(dict.fromkeys(p for item in items for p in item.context))


def evaluate(items: Sequence[HotpotItem], titled: TitleLookup | None = None) -> dict[str, Any]:
    """`titled`: dates an alternative missing from the item's paragraphs from the corpus."""
    choice, neither = 0, 0
    neither_examples: list[dict[str, str]] = []
    timed: Counter[str] = Counter()
    disagreements: list[dict[str, Any]] = []
    for item in items:
        offered = offered_choice(item.question)
        if offered is None:
            continue
        choice += 1
        for shape in SHAPES:
            if picked_alternative(item.question, shape.format(item.answer)) == "neither":
                neither += 1
                neither_examples.append({"question": item.question, "response": shape.format(item.answer)})
        gold = check_comparison(item.question, item.answer, item.context, titled)
        if gold is None:
            continue
        timed[gold.outcome] += 1
        if gold.outcome == "disagrees":
            disagreements.append(
                {
                    "question": item.question,
                    "gold": item.answer,
                    "dates": [None if d is None else str(d) for d in gold.dates],
                }
            )
        if gold.expected is not None:
            other_answer = offered.alternatives[1 - gold.picked]
            other = check_comparison(item.question, other_answer, item.context, titled)
            timed["other_disagrees"] += other is not None and other.outcome == "disagrees"
    decided = timed["agrees"] + timed["disagrees"]
    return {
        "items": len(items),
        "choice_questions": choice,
        "gold_responses_judged_neither": neither,
        "gold_responses": choice * len(SHAPES),
        "neither_examples": neither_examples,
        "comparisons_in_time": sum(timed[k] for k in ("agrees", "disagrees", "undecided")),
        "decided": decided,
        "agrees_with_gold": timed["agrees"],
        "disagrees_with_gold": timed["disagrees"],
        "undecided": timed["undecided"],
        "other_alternative_disagrees": timed["other_disagrees"],
        "disagreements": disagreements,
    }
