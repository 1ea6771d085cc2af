"""`ragmend bench nli --suite`: the standard NLI evaluation of the shipped model, written to docs/nli.md.

Every set here is evaluation-only for ragmend's model: it is never listed in a training mix
(the trainer refuses the evaluation-licensed ones; MNLI dev-matched and SNLI test are simply
never named). The FEVER claim-vs-evidence set is built from the TEST split only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ragmend.bench.harness.nli_eval import classification_metrics, score_nli
from ragmend.bench.markdown import markdown_table
from ragmend.corpora.readers import (
    FEVER_TO_NLI,
    NLI_LABELS,
    NLI_SETS,
    NLIPair,
    load_fever_claims,
    load_nli,
    load_sufficient_facts,
)
from ragmend.fileio import atomic_write_text


@dataclass(frozen=True)
class SuiteSet:
    name: str
    title: str
    load: Callable[[Path], list[NLIPair]]
    target: tuple[str, float] | None = None  # (metric, at least)
    two_way: bool = False  # score entailment vs contradiction only (support vs refute)


def _shared(name: str) -> Callable[[Path], list[NLIPair]]:
    relpath = {s.name: s.relpath for s in NLI_SETS}[name]
    return lambda root: load_nli(root / relpath)


def fever_claim_evidence_test(root: Path) -> list[NLIPair]:
    """FEVER TEST-split claims against their evidence (SUPPORTS/REFUTES), plus SufficientFacts
    NOT ENOUGH versions of TEST-split claims (evidence with a fact removed -> neutral)."""
    claims = load_fever_claims(root / "fever" / "fever_claims_with_evidence_text.jsonl", split="test")
    nei = load_sufficient_facts(root / "fever" / "sufficientfacts_fever.jsonl", split="test")
    pairs = [
        NLIPair(c.evidence_text, c.claim, FEVER_TO_NLI[c.label], f"fever-{i}") for i, c in enumerate(claims)
    ]
    pairs += [NLIPair(c.evidence_text, c.claim, "neutral", f"fever-nei-{i}") for i, c in enumerate(nei)]
    return pairs


def hotpot_statement_test(root: Path) -> list[NLIPair]:
    """The diagnosis' own query signal on HotpotQA TEST items: both gold paragraphs against the
    question as a statement with the gold answer (entailment), with a wrong answer in its slot
    (contradiction), and a distractor paragraph against it (neutral). Built as `ragmend nli
    pairs` builds its DEV-split training files (corpora/nli_pairs.py), never trained on."""
    from ragmend.corpora.nli_pairs import EntitySwapper, hotpot_statement_pairs
    from ragmend.corpora.readers import load_hotpotqa
    from ragmend.models.spacy_model import load_spacy
    from ragmend.settings import ModelsSettings

    items = load_hotpotqa(root / "hotpotqa" / "hotpot_dev_distractor_merged.json", split="test")
    # The wrong answers come from the gold paragraphs' entities (a smaller pool parses faster).
    pool = [p for i in items for t, p in i.context if t in i.supporting_titles]
    swapper = EntitySwapper(load_spacy(ModelsSettings()), pool, seed=0)
    built = hotpot_statement_pairs(items, swapper, seed=0)
    # Item by item (ids end in the item's id), so that --limit N still mixes the three labels.
    pairs = [p for rows in built.values() for p in rows]
    return sorted(pairs, key=lambda p: (p.id.rsplit("-", 1)[1], p.id))


SUITE: tuple[SuiteSet, ...] = (
    SuiteSet("mnli_dev_matched", "MNLI dev-matched", _shared("mnli_dev_matched"), ("accuracy", 0.72)),
    SuiteSet("snli_test", "SNLI test", _shared("snli_test"), ("accuracy", 0.82)),
    SuiteSet(
        "fever_symmetric_test",
        "FEVER-Symmetric test, support vs refute",
        _shared("fever_symmetric_test"),
        ("accuracy", 0.80),
        two_way=True,
    ),
    SuiteSet(
        "fever_claim_evidence_test",
        "FEVER test claim vs evidence, 3-way",
        fever_claim_evidence_test,
        ("macro_f1", 0.75),
    ),
    SuiteSet(
        "hotpot_statement_test",
        "HotpotQA test question-as-statement vs gold paragraphs, 3-way",
        hotpot_statement_test,
    ),
    SuiteSet("anli_dev_r1", "ANLI dev r1", _shared("anli_dev_r1")),
    SuiteSet("anli_dev_r2", "ANLI dev r2", _shared("anli_dev_r2")),
    SuiteSet("anli_dev_r3", "ANLI dev r3", _shared("anli_dev_r3")),
    SuiteSet("xnli_en_test", "XNLI en test", _shared("xnli_en_test")),
)


def evaluate_set(model: Any, s: SuiteSet, pairs: list[NLIPair]) -> dict[str, Any]:
    result, probs = score_nli(model, pairs)
    if s.two_way:
        # Support vs refute: the decision is entailment vs contradiction, so neutral's mass is
        # set aside (the 3-way scores stay in `three_way`).
        pred = np.where(probs[:, 0] >= probs[:, 2], "entailment", "contradiction")
        three_way = {k: result[k] for k in ("accuracy", "macro_f1", "confusion")}
        two = classification_metrics([p.label for p in pairs], list(pred), ("entailment", "contradiction"))
        result |= {k: two[k] for k in ("accuracy", "macro_f1", "confusion")} | {"three_way": three_way}
    if s.target:
        metric, floor = s.target
        result["target"] = {"metric": metric, "at_least": floor, "met": result[metric] >= floor}
    return result


def speed_check(
    load: Callable[[], Any],
    pairs: list[NLIPair],
    tokens: tuple[int, int] = (90, 110),
    n: int = 512,
    repeats: int = 3,
) -> dict[str, Any]:
    """Pairs/s on pairs of about 100 tokens (the issue's yardstick), median of `repeats` runs, and
    the median load time of the role. The model's batch size applies (16 by default)."""
    import statistics
    import time

    loads = []
    model = None
    for _ in range(repeats):
        t0 = time.perf_counter()
        model = load()
        loads.append(time.perf_counter() - t0)
    assert model is not None
    chosen = [p for p in pairs if tokens[0] <= model.count_tokens(p.premise, p.hypothesis) <= tokens[1]][:n]
    if not chosen:
        raise ValueError(f"no pairs of {tokens[0]}-{tokens[1]} tokens for the speed check")
    rates = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        model.predict([(p.premise, p.hypothesis) for p in chosen])
        rates.append(len(chosen) / (time.perf_counter() - t0))
    mean_tokens = float(np.mean([model.count_tokens(p.premise, p.hypothesis) for p in chosen]))
    return {
        "pairs": len(chosen),
        "mean_tokens": round(mean_tokens, 1),
        "batch_size": model.batch_size,
        "pairs_per_s": round(statistics.median(rates), 1),
        "load_s": round(statistics.median(loads), 3),
        "target": {"pairs_per_s_at_least": 100.0, "load_s_below": 2.0},
        "met": statistics.median(rates) >= 100.0 and statistics.median(loads) < 2.0,
    }


def run_suite(
    model: Any, data_root: Path, limit: int | None = None, log: Callable[[str], None] = lambda _: None
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for s in SUITE:
        pairs = s.load(data_root)
        pairs = [p for p in pairs if p.label in NLI_LABELS][:limit]
        out[s.name] = {"title": s.title} | evaluate_set(model, s, pairs)
        r = out[s.name]
        log(f"{s.title}: n={r['n']} accuracy={r['accuracy']:.3f} macro_f1={r['macro_f1']:.3f}")
    return out


def suite_markdown(results: dict[str, Any], speed: dict[str, Any] | None, command: str) -> str:
    rows = []
    for r in results.values():
        t = r.get("target")
        target = f"{t['metric']} >= {t['at_least']}" if t else "(report only)"
        met = ("yes" if t["met"] else "**no**") if t else ""
        rows.append(
            [
                r["title"],
                f"{r['n']:,}",
                f"{100 * r['accuracy']:.1f}",
                f"{r['macro_f1']:.3f}",
                target,
                met,
                f"{r['pairs_per_s']:.0f}",
            ]
        )
    head = ["set", "n", "accuracy", "macro-F1", "target", "met", "pairs/s"]
    lines = [f"Command: `{command}`", "", *markdown_table(head, rows, align="lrrrllr")]
    if speed:
        lines += [
            "",
            f"Speed: {speed['pairs_per_s']:.0f} pairs/s on {speed['pairs']} pairs of "
            f"{speed['mean_tokens']:.0f} tokens on average, batch {speed['batch_size']} (median of 3 runs; "
            f"target >= 100); load {speed['load_s']:.2f} s (median of 3; target < 2 s): "
            f"{'met' if speed['met'] else '**not met**'}.",
        ]
    return "\n".join(lines) + "\n"


SUITE_START, SUITE_END = "<!-- nli-suite:start -->", "<!-- nli-suite:end -->"


def write_suite_section(doc: Path, section: str) -> None:
    """Replace the text between the suite markers of `doc` (appended when absent); atomic."""
    text = doc.read_text(encoding="utf-8") if doc.exists() else ""
    block = f"{SUITE_START}\n{section}{SUITE_END}"
    if SUITE_START in text and SUITE_END in text:
        head, rest = text.split(SUITE_START, 1)
        text = head + block + rest.split(SUITE_END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    atomic_write_text(doc, text)
