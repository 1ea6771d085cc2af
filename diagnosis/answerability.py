"""Answerability: does the evidence answer the QUESTION, whatever a response says.

The cross-encoder's relevance of the best passage alone (the `rerank` construction) is fooled by
on-topic evidence: a HotpotQA question whose gold paragraphs are gone still retrieves paragraphs
about the same names, which look relevant. What such evidence lacks is the question's own subjects:
no passage is titled by, or even names, some of the names the question asks about. The model here
reads both kinds of signal, fitted as one logistic regression on DEV questions only
(`ragmend bench answerability --fit`), no generator involved: the question and what retrieval
returned for it are all it needs.

Features (each a function of the question and the evidence):
- rel_max, rel_second: the best and the second-best passage's cross-encoder relevance (sigmoid);
- name_coverage: the share of the question's names and numbers the evidence holds (any passage);
- best_coverage: the largest share one passage holds (a two-entity question needs both somewhere);
- title_coverage: the share of the question's names that title a passage (its own page retrieved);
- rel_titled: the best relevance among passages titled by one of the question's names (0 when none
  is; rel_max when the question names nothing): relevant text on the question's own page;
- qsim_max: the best cosine similarity of the question and a passage (the embedding model's).
A question naming nothing (TruthfulQA's "What happens if you swallow gum?") has coverages of 1 and
`has_names` 0: the relevance decides it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

import ragmend
from ragmend.diagnosis.spans import best_passage_coverage, key_spans, normalise, span_coverage
from ragmend.diagnosis.verdict import LinearScore
from ragmend.errors import ConfigError
from ragmend.fileio import atomic_write_text

FEATURES = (
    "rel_max",
    "rel_second",
    "name_coverage",
    "best_coverage",
    "title_coverage",
    "rel_titled",
    "has_names",
    "qsim_max",
)
# The direction each feature may push P(answerable) (logistic.fit_logistic's active set): more
# relevance, more of the question's names found, more similarity never make a question less
# answerable. has_names is free: it only says whether the coverages mean anything.
SIGNS = {
    "rel_max": 1,
    "rel_second": 1,
    "name_coverage": 1,
    "best_coverage": 1,
    "title_coverage": 1,
    "rel_titled": 1,
    "has_names": 0,
    "qsim_max": 1,
}
BUNDLED = Path(ragmend.__file__).parent / "assets" / "verdict" / "answerability.json"


def answerability_features(
    query: str,
    titles: Sequence[str],
    evidence: Sequence[str],
    relevance: np.ndarray | None,
    q_sims: np.ndarray | None,
) -> dict[str, float]:
    """The model's inputs for one question and its evidence (`evidence`: each passage as the
    diagnosis reads it, title first; `relevance`: sigmoid of the cross-encoder's logits; `q_sims`:
    cosine of the question and each passage). Missing signals read as 0."""
    scores = np.asarray(relevance if relevance is not None else [], dtype=np.float64)
    rel = np.sort(scores)[::-1]
    names = key_spans(query)
    if names:  # the best relevance among the passages titled by one of the question's names
        titled = [i for i, t in enumerate(titles) if i < len(scores) and title_coverage(names, [t]) > 0]
        rel_titled = max((float(scores[i]) for i in titled), default=0.0)
    else:
        rel_titled = float(rel[0]) if len(rel) else 0.0
    name_cov = span_coverage(query, evidence) if evidence else 0.0
    best_cov = best_passage_coverage(query, evidence)
    return {
        "rel_max": float(rel[0]) if len(rel) else 0.0,
        "rel_second": float(rel[1]) if len(rel) > 1 else 0.0,
        "name_coverage": 1.0 if name_cov is None else float(name_cov),
        "best_coverage": 1.0 if best_cov is None else float(best_cov),
        "title_coverage": title_coverage(names, titles),
        "rel_titled": rel_titled,
        "has_names": 1.0 if names else 0.0,
        "qsim_max": float(np.max(q_sims)) if q_sims is not None and len(q_sims) else 0.0,
    }


def title_coverage(names: Sequence[str], titles: Sequence[str]) -> float:
    """The share of the question's names that a passage's title holds or is held by ("Jaws" and
    "Jaws (film)"; "Steven Spielberg" and "Spielberg"). 1 when the question names nothing."""
    if not names:
        return 1.0
    keys = [normalise(t) for t in titles if t.strip()]
    found = 0
    for name in names:
        n = normalise(name)
        if n and any(_holds(t, n) or _holds(n, t) for t in keys):
            found += 1
    return found / len(names)


def _holds(text: str, part: str) -> bool:
    return bool(part) and f" {part} " in f" {text} "


@dataclass(frozen=True)
class AnswerabilityModel:
    """P(the evidence answers the question); answerable when it reaches `threshold`."""

    score: LinearScore
    threshold: float
    about: dict[str, Any] = field(default_factory=dict)

    def probability(self, features: Mapping[str, float]) -> float:
        return self.score.probability(features)

    def as_json(self) -> dict[str, Any]:
        return {"score": self.score.as_json(), "threshold": self.threshold, "about": self.about}

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> AnswerabilityModel:
        try:
            model = AnswerabilityModel(
                LinearScore.from_json(d["score"]), float(d["threshold"]), dict(d.get("about", {}))
            )
        except (KeyError, TypeError, ValueError) as e:
            raise ConfigError(f"answerability model: {e}") from e
        unknown = sorted(set(model.score.features) - set(FEATURES))
        if unknown:
            raise ConfigError(f"answerability model: unknown features {unknown}")
        return model

    @staticmethod
    def load(path: Path) -> AnswerabilityModel:
        try:
            return AnswerabilityModel.from_json(json.loads(Path(path).read_text(encoding="utf-8")))
        except (OSError, json.JSONDecodeError) as e:
            raise ConfigError(f"answerability model {path} could not be read: {e}") from e

    def save(self, path: Path) -> None:
        atomic_write_text(Path(path), json.dumps(self.as_json(), indent=1) + "\n")


def open_answerability(spec: str, threshold: float | None = None) -> AnswerabilityModel | None:
    """'off': none (the best passage's relevance against diagnosis.relevance_threshold decides);
    'bundled': the shipped model; anything else: a file from `ragmend bench answerability --fit`.
    `threshold`: the operating point in place of the file's own (diagnosis.answerable_threshold)."""
    if spec == "off":
        return None
    model = AnswerabilityModel.load(BUNDLED if spec == "bundled" else Path(spec))
    return model if threshold is None else replace(model, threshold=threshold)
