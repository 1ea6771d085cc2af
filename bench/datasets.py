"""The shared data sets (../shared/data), read once, with the fixed dev / test split rule.

One loader per format and one split rule for all of them: no per-dataset copies of either.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Split = Literal["dev", "test"]


def split_of(key: str) -> Split:
    """The data README's rule: dev when int(sha256(key), 16) is even, else test."""
    return "dev" if int(hashlib.sha256(key.encode("utf-8")).hexdigest(), 16) % 2 == 0 else "test"


@dataclass(frozen=True)
class Paragraph:
    id: str
    title: str
    text: str

    def as_json(self) -> dict[str, str]:
        return {"id": self.id, "title": self.title, "text": self.text}


@dataclass(frozen=True)
class HotpotItem:
    id: str
    question: str
    answer: str
    type: str
    level: str
    supporting_titles: tuple[str, ...]
    context: tuple[tuple[str, str], ...]  # (title, paragraph text)

    @property
    def split(self) -> Split:
        return split_of(self.id)


def _maybe_json(value: object) -> object:
    return json.loads(value) if isinstance(value, str) else value


def load_hotpotqa(path: Path, split: Split | None = None) -> list[HotpotItem]:
    items = []
    for row in json.loads(Path(path).read_text(encoding="utf-8")):
        context = tuple((title, "".join(sents).strip()) for title, sents in _maybe_json(row["context"]))
        facts = _maybe_json(row["supporting_facts"])
        item = HotpotItem(
            id=row["_id"],
            question=row["question"],
            answer=row["answer"],
            type=row.get("type", ""),
            level=row.get("level", ""),
            supporting_titles=tuple(dict.fromkeys(t for t, _ in facts)),
            context=context,
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


def write_jsonl(rows: Iterable[dict[str, object]], path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
    return n


def read_jsonl(path: Path) -> Iterator[dict[str, object]]:
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)
