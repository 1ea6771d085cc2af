"""The grounded shape every hallucination set is read into (corpora/hallucination.py and the
modules beside it): a source, an optional question, a response, whether the source supports it,
and where the set says so, the response's unsupported character spans."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

Task = Literal["qa", "summary", "data2txt", "dialogue", "claim"]
TASKS: tuple[Task, ...] = ("qa", "summary", "data2txt", "dialogue", "claim")
Spans = tuple[tuple[int, int], ...]


@dataclass(frozen=True, kw_only=True)
class Grounded:
    """One response and the source it should rest on."""

    id: str
    set: str  # where it comes from: a shared set, or "edit" (ragmend's controlled edits)
    task: Task
    question: str  # the question or dialogue turn it answers ("" for a summary)
    source: tuple[str, ...]  # the passages, the document or the knowledge
    response: str
    unsupported: bool
    spans: Spans | None  # unsupported character ranges of the response; None: unknown where
    group: str  # what must stay in one split (a source document): rows sharing it are split together
    kind: str = ""  # the edit or label that made it (for the data card)

    def as_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["source"] = list(self.source)
        d["spans"] = None if self.spans is None else [list(s) for s in self.spans]
        return d

    @staticmethod
    def from_json(d: dict[str, Any]) -> Grounded:
        spans = None if d["spans"] is None else tuple((int(a), int(b)) for a, b in d["spans"])
        return Grounded(**{**d, "source": tuple(d["source"]), "spans": spans})
