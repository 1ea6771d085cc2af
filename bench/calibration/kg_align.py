"""`ragmend bench kg`: calibrate the alignment thresholds on HotpotQA DEV.

The graph is built from the gold paragraphs of dev questions. Statements: each supporting
sentence of those paragraphs (true: should align consistent) and the same sentence with one
named entity swapped by spaCy (false: should align conflict; the swap of corpora/nli_pairs.py).
For each threshold setting the alignment of every statement is scored: how many true
statements come out consistent, how many false ones come out conflict, and the balanced
accuracy of "conflict" as a detector of the false ones (kappa missing / no_triplet count as "not
flagged"). The setting with the best balanced accuracy is reported, labelled as tuned on dev.
"""

from __future__ import annotations

import itertools
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ragmend.corpora.nli_pairs import PREMISE_WORDS, EntitySwapper
from ragmend.corpora.readers import load_hotpotqa
from ragmend.kg import AlignThresholds, KGStore, SpacyTripleExtractor, align
from ragmend.kg.phrases import embed_with
from ragmend.models.registry import ModelRegistry
from ragmend.settings import Settings

GRID = {
    "subject": (0.8, 0.9),
    "relation": (0.7, 0.8, 0.9),
    "object": (0.5, 0.7),
}


def _memoised(embed: Callable[[list[str]], np.ndarray]) -> Callable[[list[str]], np.ndarray]:
    """The grid aligns the same statements many times: embed each phrase once."""
    seen: dict[str, np.ndarray] = {}

    def cached(texts: list[str]) -> np.ndarray:
        new = [t for t in dict.fromkeys(texts) if t not in seen]
        if new:
            seen.update(zip(new, embed(new), strict=True))
        return np.stack([seen[t] for t in texts]) if texts else np.zeros((0, 384), dtype=np.float32)

    return cached


def run_kg_bench(
    settings: Settings, data: Path, n_questions: int = 100, log: Callable[[str], None] = print
) -> dict[str, Any]:
    models = ModelRegistry(settings)
    nlp, embed = models.spacy, _memoised(embed_with(models.embeddings))
    extractor = SpacyTripleExtractor(nlp, max_triples_per_text=settings.kg.max_triples_per_chunk)
    items = [i for i in load_hotpotqa(data) if i.split == "dev" and i.supporting_sentences()][:n_questions]
    docs: dict[str, tuple[str, list[tuple[str, str]]]] = {}
    statements: list[tuple[str, bool]] = []
    swapper = EntitySwapper(nlp, [p for i in items for _, p in i.context], seed=0)
    for item in items:
        for title, text in item.context:
            if title in item.supporting_titles:
                docs[title] = (str(hash(text)), [(f"{title}#0", f"{title}: {text}")])
        for _, paragraph, sentence in item.supporting_sentences(PREMISE_WORDS):
            statements.append((sentence, True))
            if swap := swapper.swap(sentence, avoid=paragraph):
                statements.append((swap.text, False))
    with tempfile.TemporaryDirectory() as tmp:
        store = KGStore(Path(tmp) / "graph.sqlite3", extractor, embed, embed_name="bench")
        t0 = time.perf_counter()
        report = store.sync(docs)
        build_s = time.perf_counter() - t0
        log(f"graph: {len(docs)} paragraphs, {report.triples_added} triples in {build_s:.1f} s")
        triples = extractor.extract([s for s, _ in statements])
        settings_out = []
        for subj, rel, obj in itertools.product(GRID["subject"], GRID["relation"], GRID["object"]):
            th = AlignThresholds(subj, rel, obj)
            kappas = [align(t, store, embed, th).kappa for t in triples]
            true_ok = [k == "consistent" for k, (_, truth) in zip(kappas, statements, strict=True) if truth]
            false_hit = [
                k == "conflict" for k, (_, truth) in zip(kappas, statements, strict=True) if not truth
            ]
            true_flagged = [
                k == "conflict" for k, (_, truth) in zip(kappas, statements, strict=True) if truth
            ]
            tpr = sum(false_hit) / max(1, len(false_hit))
            fpr = sum(true_flagged) / max(1, len(true_flagged))
            row = {
                "subject": subj,
                "relation": rel,
                "object": obj,
                "true_consistent": round(sum(true_ok) / max(1, len(true_ok)), 4),
                "false_conflict": round(tpr, 4),
                "true_conflict": round(fpr, 4),
                "balanced_accuracy": round((tpr + 1 - fpr) / 2, 4),
            }
            settings_out.append(row)
            log(str(row))
    n_true = sum(1 for _, t in statements if t)
    best = max(settings_out, key=lambda r: r["balanced_accuracy"])
    reference = next(r for r in settings_out if (r["subject"], r["relation"], r["object"]) == (0.9, 0.9, 0.5))
    return {
        "split": "dev",
        "questions": len(items),
        "paragraphs": len(docs),
        "graph_triples": report.triples_added,
        "graph_build_s": round(build_s, 1),
        "statements": {"true": n_true, "false": len(statements) - n_true},
        "extracted_nothing": sum(1 for t in triples if not t),
        "grid": settings_out,
        "reference_0.9_0.9_0.5": reference,
        "best_tuned_on_dev": best,
    }
