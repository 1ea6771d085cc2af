"""Regenerates rag/data/: the bundled sample corpus and its questions.

The first 40 questions of the HotpotQA DEV split (by file order) with all their context
paragraphs (gold and distractors): a few hundred Wikipedia paragraphs, CC BY-SA 4.0.

    python scripts/make_sample_corpus.py ../shared/data/hotpotqa/hotpot_dev_distractor_merged.json
"""

from __future__ import annotations

import sys
from pathlib import Path

from ragmend.corpora.readers import hotpotqa_paragraphs, load_hotpotqa, write_jsonl

N_QUESTIONS = 40


def main(src: str) -> None:
    items = load_hotpotqa(Path(src), split="dev")[:N_QUESTIONS]
    out = Path(__file__).resolve().parent.parent / "rag" / "data"
    n = write_jsonl((p.as_json() for p in hotpotqa_paragraphs(items)), out / "sample_corpus.jsonl")
    write_jsonl(
        (
            {
                "id": i.id,
                "question": i.question,
                "answer": i.answer,
                "supporting_titles": list(i.supporting_titles),
            }
            for i in items
        ),
        out / "sample_questions.jsonl",
    )
    print(f"{n} paragraphs, {len(items)} questions -> {out}")


if __name__ == "__main__":
    main(sys.argv[1])
