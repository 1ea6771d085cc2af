"""`ragmend bench nli --suite`: the standard NLI evaluation of the shipped model, written to docs/nli.md.

Every set here is evaluation-only for ragmend's model: it is never listed in a training mix
(the trainer refuses the evaluation-licensed ones; MNLI dev-matched and SNLI test are simply
never named). The FEVER claim-vs-evidence set is built from the TEST split only, and so is the
long-premise set (paragraph-length premises, read whole and as the diagnosis reads them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ragmend.bench.harness.nli_eval import classification_metrics, score_nli
from ragmend.bench.markdown import markdown_table
from ragmend.corpora.nli_pairs import HOTPOT_PREMISE_WORDS, PREMISE_WORDS, fever_long_premise_pairs
from ragmend.corpora.readers import (
    FEVER_TO_NLI,
    NLI_LABELS,
    NLI_SETS,
    FeverClaim,
    HotpotItem,
    NLIPair,
    load_fever_claims,
    load_hotpotqa,
    load_nli,
    load_sufficient_facts,
)
from ragmend.fileio import atomic_write_text


@dataclass(frozen=True, kw_only=True)
class SuiteSet:
    name: str
    title: str
    # (data root, limit): the set's pairs; with a limit, a loader that builds its pairs (parsing
    # every item) may read only the items that many pairs need.
    load: Callable[[Path, int | None], list[NLIPair]]
    target: tuple[str, float] | None = None  # (metric, bound): at least, or at most (`direction`)
    two_way: bool = False  # score entailment vs contradiction only (support vs refute)
    direction: Literal["at_least", "at_most"] = "at_least"  # how `target`'s bound reads
    # > 0: each premise is read as the diagnosis reads a passage with diagnosis.window_sentences
    # set: windows of this many sentences overlapping by one, the pair taking its most decisive
    # window's probabilities (score_windows). 0: the whole premise in one pair.
    windows: int = 0
    # Pairs come as a true sentence (id X-true) and its swap (id X): also report how often the
    # true one gets the higher P(entailment) (`true_above_swap`, 0.5 is a coin).
    paired: bool = False


def _shared(name: str) -> Callable[[Path, int | None], list[NLIPair]]:
    relpath = {s.name: s.relpath for s in NLI_SETS}[name]

    def load(root: Path, limit: int | None = None) -> list[NLIPair]:
        return load_nli(root / relpath)  # read whole: reading it parses nothing

    return load


def _fever_test(root: Path) -> tuple[list[FeverClaim], list[FeverClaim]]:
    """The FEVER TEST-split claims with evidence, and SufficientFacts' NOT ENOUGH test claims."""
    claims = load_fever_claims(root / "fever" / "fever_claims_with_evidence_text.jsonl", split="test")
    return claims, load_sufficient_facts(root / "fever" / "sufficientfacts_fever.jsonl", split="test")


def fever_claim_evidence_test(root: Path, limit: int | None = None) -> list[NLIPair]:
    """FEVER TEST-split claims against their evidence (SUPPORTS/REFUTES), plus SufficientFacts
    NOT ENOUGH versions of TEST-split claims (evidence with a fact removed -> neutral). Read
    whole whatever the `limit`: reading them parses nothing."""
    claims, nei = _fever_test(root)
    pairs = [
        NLIPair(premise=c.evidence_text, hypothesis=c.claim, label=FEVER_TO_NLI[c.label], id=f"fever-{i}")
        for i, c in enumerate(claims)
    ]
    pairs += [
        NLIPair(premise=c.evidence_text, hypothesis=c.claim, label="neutral", id=f"fever-nei-{i}")
        for i, c in enumerate(nei)
    ]
    return pairs


def hotpot_statement_test(root: Path, limit: int | None = None) -> list[NLIPair]:
    """The diagnosis' own query signal on HotpotQA TEST items: both gold paragraphs against the
    question as a statement with the gold answer (entailment), with a wrong answer in its slot
    (contradiction), and a distractor paragraph against it (neutral). Built as `ragmend nli
    pairs` builds its DEV-split training files (corpora/nli_pairs.py), never trained on. With a
    `limit`, only as many items are read as give that many pairs (many items give none)."""
    read = limit
    while True:
        built = _hotpot_statements(root, read)
        # Item by item (ids end in the item's id), so that --limit N still mixes the three labels.
        pairs = sorted((p for rows in built.values() for p in rows), key=_by_item)
        if read is None or len(pairs) >= read or read >= len(_hotpot_test_items(root)):
            return pairs
        read *= 4


def _by_item(p: NLIPair) -> tuple[str, str]:
    """A pair's order: its item's id (the id's last part), then its own."""
    return p.id.rsplit("-", 1)[1], p.id


@lru_cache(maxsize=1)
def _hotpot_test_items(root: Path) -> tuple[HotpotItem, ...]:
    return tuple(load_hotpotqa(root / "hotpotqa" / "hotpot_dev_distractor_merged.json", split="test"))


def _hotpot_statements(root: Path, limit: int | None = None, **kw: Any) -> dict[str, list[NLIPair]]:
    """corpora.nli_pairs.hotpot_statement_pairs on the first `limit` HotpotQA TEST items; `kw`
    goes to it (premise length, distractor count)."""
    from ragmend.corpora.nli_pairs import EntitySwapper, hotpot_statement_pairs
    from ragmend.models.spacy_model import load_spacy
    from ragmend.settings import ModelsSettings

    items = list(_hotpot_test_items(root)[:limit])
    # The wrong answers come from the gold paragraphs' entities (a smaller pool parses faster).
    pool = [p for i in items for t, p in i.context if t in i.supporting_titles]
    swapper = EntitySwapper(load_spacy(ModelsSettings()), pool, seed=0)
    return hotpot_statement_pairs(items, swapper, seed=0, **kw)


# The long-premise set, so that length is not read as support. A premise is paragraph-length:
# HotpotQA's two gold paragraphs (up to 100 words of each around the supporting sentences, whole
# for most) or two distractor paragraphs; FEVER evidence followed by other claims' evidence up to
# FEVER_PREMISE_WORDS (corpora.nli_pairs, which builds the DEV-split training pairs the same way).
# At 200 words a premise still mostly fits the role's 256 tokens (the truncated count is reported).
LONG_PREMISE_MIN_WORDS = 60


def interleave(groups: Iterable[Sequence[NLIPair]]) -> list[NLIPair]:
    """The groups' pairs taken in turn (first of each, then second of each...), so that the first
    N pairs mix every group: what `--limit N` evaluates."""
    rows = [list(g) for g in groups]
    return [g[i] for i in range(max(map(len, rows), default=0)) for g in rows if i < len(g)]


def long_premise_test(root: Path, limit: int | None = None) -> list[NLIPair]:
    """The long-premise set, from TEST splits only: paragraph-length premises (>= 60 words) against
    HotpotQA question-statements (both gold paragraphs vs the gold answer's statement:
    entailment; vs a wrong answer's: contradiction; two distractor paragraphs of the item vs the
    gold answer's: neutral) and FEVER claims (fever_long_premise_pairs). Labels and sources are
    interleaved. `limit` caps the HotpotQA items and FEVER claims read (a quick build)."""
    return list(_long_premise_test(root, limit))


@lru_cache(maxsize=2)  # the model-alone and windowed sets read the same pairs
def _long_premise_test(root: Path, limit: int | None) -> tuple[NLIPair, ...]:
    hotpot = _hotpot_statements(root, limit, premise_words=HOTPOT_PREMISE_WORDS, distractors=2)
    claims, nei = _fever_test(root)
    fever = fever_long_premise_pairs(claims[:limit], nei[:limit], seed=0)
    groups = [hotpot.get(f"hotpot_statement{s}", []) for s in ("", "_distractor", "_swap")]
    groups += [[p for p in fever if p.label == label] for label in NLI_LABELS]
    long = [[p for p in g if len(p.premise.split()) >= LONG_PREMISE_MIN_WORDS] for g in groups]
    return tuple(interleave(long))


def swap_within_test(root: Path, limit: int | None = None) -> list[NLIPair]:
    """Names in another role, from TEST splits only: HotpotQA supporting sentences against their
    paragraph and FEVER SUPPORTS claims against their evidence (entailment), each beside itself
    with one named entity swapped for another of its type that the premise holds
    (contradiction: corpora.nli_pairs.swap_within_pairs, which builds the DEV training files the
    same way). Only sentences with such a swap, so both labels have the same sentences. `limit`
    caps the HotpotQA items and FEVER claims read."""
    return list(_swap_within_test(root, limit))


@lru_cache(maxsize=1)
def _swap_within_test(root: Path, limit: int | None) -> tuple[NLIPair, ...]:
    from ragmend.corpora.nli_pairs import EntitySwapper, swap_within_pairs
    from ragmend.models.spacy_model import load_spacy
    from ragmend.settings import ModelsSettings

    items = list(_hotpot_test_items(root)[:limit])
    claims = _fever_test(root)[0][:limit]
    swaps = swap_within_pairs(items, claims, EntitySwapper(load_spacy(ModelsSettings()), []), seed=0)
    # The true sentence each swap was made from, by the ids swap_within_pairs gives.
    sentences = {
        f"hotpot-within-{item.id}-{j}": (f"{title}: {paragraph}", sentence)
        for item in items
        for j, (title, paragraph, sentence) in enumerate(item.supporting_sentences(PREMISE_WORDS))
    }
    sentences |= {f"fever-within-{i}": (c.evidence_text, c.claim) for i, c in enumerate(claims)}
    groups = []
    for key in ("hotpot_swap_within", "fever_swap_within"):
        swapped = swaps.get(key, [])
        true = [
            NLIPair(
                premise=sentences[p.id][0],
                hypothesis=sentences[p.id][1],
                label="entailment",
                id=f"{p.id}-true",
            )
            for p in swapped
        ]
        groups += [true, swapped]
    return tuple(interleave(groups))


SUITE: tuple[SuiteSet, ...] = (
    SuiteSet(
        name="mnli_dev_matched",
        title="MNLI dev-matched",
        load=_shared("mnli_dev_matched"),
        target=("accuracy", 0.72),
    ),
    SuiteSet(name="snli_test", title="SNLI test", load=_shared("snli_test"), target=("accuracy", 0.82)),
    SuiteSet(
        name="fever_symmetric_test",
        title="FEVER-Symmetric test, support vs refute",
        load=_shared("fever_symmetric_test"),
        target=("accuracy", 0.80),
        two_way=True,
    ),
    SuiteSet(
        name="fever_claim_evidence_test",
        title="FEVER test claim vs evidence, 3-way",
        load=fever_claim_evidence_test,
        target=("macro_f1", 0.75),
    ),
    SuiteSet(
        name="hotpot_statement_test",
        title="HotpotQA test question-as-statement vs gold paragraphs, 3-way",
        load=hotpot_statement_test,
    ),
    SuiteSet(
        name="long_premise_test",
        title="Long premises (HotpotQA and FEVER test), 3-way",
        load=long_premise_test,
        target=("false_entailment_rate", 0.10),
        direction="at_most",
    ),
    SuiteSet(
        name="long_premise_test_windows2",
        title="Long premises (HotpotQA and FEVER test), 3-way, as the diagnosis scores it, "
        "windows of 2 sentences",
        load=long_premise_test,
        target=("false_entailment_rate", 0.10),
        direction="at_most",
        windows=2,
    ),
    SuiteSet(
        name="swap_within_test",
        title="Names in another role (HotpotQA, FEVER test): a sentence, "
        "and with a name of its premise swapped in",
        load=swap_within_test,
        target=("false_entailment_rate", 0.10),
        direction="at_most",
        paired=True,
    ),
    SuiteSet(name="anli_dev_r1", title="ANLI dev r1", load=_shared("anli_dev_r1")),
    SuiteSet(name="anli_dev_r2", title="ANLI dev r2", load=_shared("anli_dev_r2")),
    SuiteSet(name="anli_dev_r3", title="ANLI dev r3", load=_shared("anli_dev_r3")),
    SuiteSet(name="xnli_en_test", title="XNLI en test", load=_shared("xnli_en_test")),
)


def evaluate_set(model: Any, s: SuiteSet, pairs: list[NLIPair]) -> dict[str, Any]:
    result, probs = score_windows(model, pairs, s.windows) if s.windows else score_nli(model, pairs)
    if s.two_way:
        # Support vs refute: the decision is entailment vs contradiction, so neutral's mass is
        # set aside (the 3-way scores stay in `three_way`).
        pred = np.where(probs[:, 0] >= probs[:, 2], "entailment", "contradiction")
        keys = ("accuracy", "macro_f1", "confusion", "false_entailment_rate")
        three_way = {k: result[k] for k in keys}
        two = classification_metrics([p.label for p in pairs], list(pred), ("entailment", "contradiction"))
        result |= {k: two[k] for k in keys} | {"three_way": three_way}
    if s.paired:
        result["true_above_swap"] = true_above_swap(pairs, probs)
    if s.target:
        metric, bound = s.target
        value = result[metric]
        met = value is not None and (value >= bound if s.direction == "at_least" else value <= bound)
        result["target"] = {"metric": metric, s.direction: bound, "met": met}
    return result


def true_above_swap(pairs: Sequence[NLIPair], probs: np.ndarray) -> float | None:
    """The share of (true sentence, its swap) pairs in which the true one is the more entailed:
    whether the model tells which name the premise gives in the sentence's role. None without
    pairs."""
    row = {p.id: i for i, p in enumerate(pairs)}
    wins = [
        probs[row[f"{p.id}-true"], 0] > probs[i, 0]
        for i, p in enumerate(pairs)
        if p.label == "contradiction" and f"{p.id}-true" in row
    ]
    return round(float(np.mean(wins)), 4) if wins else None


def score_windows(model: Any, pairs: list[NLIPair], sentences: int) -> tuple[dict[str, Any], np.ndarray]:
    """`score_nli` with each premise read as the diagnosis reads a passage: its windows of
    `sentences` sentences overlapping by one (diagnosis.premises.premise_windows, on the premise
    as one untitled passage: titles stay where the premise has them), all scored in one call,
    each pair taking its most decisive window's probabilities. `windows` counts the windows
    scored, `truncated` the windows cut; `pairs_per_s` is in pairs, not windows."""
    from ragmend.diagnosis.premises import premise_windows
    from ragmend.rag.types import Passage

    def passage(p: NLIPair) -> Passage:
        return Passage(id=p.id, doc_id=p.id, title="", text=p.premise, score=0.0, retriever="dense")

    windows = [premise_windows(passage(p), sentences) for p in pairs]
    flat = [
        NLIPair(premise=w, hypothesis=p.hypothesis, label=p.label, id=p.id)
        for p, ws in zip(pairs, windows, strict=True)
        for w in ws
    ]
    scored, window_probs = score_nli(model, flat)
    probs = most_decisive(window_probs, [len(ws) for ws in windows])
    out = classification_metrics([p.label for p in pairs], [NLI_LABELS[i] for i in probs.argmax(axis=1)])
    out["pairs_per_s"] = round(scored["pairs_per_s"] * len(pairs) / len(flat), 1) if flat else 0.0
    out["truncated"] = scored["truncated"]
    out["windows"] = len(flat)
    return out, probs


def most_decisive(window_probs: np.ndarray, counts: Sequence[int]) -> np.ndarray:
    """Per pair (its `counts[i]` consecutive rows of `window_probs`), the row of the window with
    the highest max(P(entailment), P(contradiction)): the diagnosis' passage score (_decisive)."""
    out = np.empty((len(counts), 3), dtype=window_probs.dtype)
    start = 0
    for i, n in enumerate(counts):
        block = window_probs[start : start + n]
        out[i] = block[int(np.argmax(np.maximum(block[:, 0], block[:, 2])))]
        start += n
    return out


def speed_check(
    load: Callable[[], Any],
    pairs: list[NLIPair],
    tokens: tuple[int, int] = (90, 110),
    n: int = 512,
    repeats: int = 3,
) -> dict[str, Any]:
    """Pairs/s on pairs of about 100 tokens (the speed target's yardstick), median of `repeats` runs, and
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
        "runs": model.runs,
        "pairs_per_s": round(statistics.median(rates), 1),
        "load_s": round(statistics.median(loads), 3),
        "target": {"pairs_per_s_at_least": 100.0, "load_s_below": 2.0},
        "met": statistics.median(rates) >= 100.0 and statistics.median(loads) < 2.0,
    }


def run_suite(
    model: Any,
    data_root: Path,
    limit: int | None = None,
    log: Callable[[str], None] = lambda _: None,
    sets: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Every set of SUITE, or those named in `sets` (in SUITE's order); an unknown name raises."""
    unknown = sorted(set(sets or ()) - {s.name for s in SUITE})
    if unknown:
        raise ValueError(f"unknown NLI suite sets {unknown}; choose from {', '.join(s.name for s in SUITE)}")
    out: dict[str, Any] = {}
    for s in SUITE:
        if sets and s.name not in sets:
            continue
        pairs = s.load(data_root, limit)
        pairs = [p for p in pairs if p.label in NLI_LABELS][:limit]
        out[s.name] = {"title": s.title} | evaluate_set(model, s, pairs)
        r = out[s.name]
        fe = r["false_entailment_rate"]
        log(
            f"{s.title}: n={r['n']} accuracy={r['accuracy']:.3f} macro_f1={r['macro_f1']:.3f}"
            + (f" false_entailment={fe:.3f}" if fe is not None else "")
        )
    return out


def suite_markdown(results: dict[str, Any], speed: dict[str, Any] | None, command: str) -> str:
    rows = []
    for r in results.values():
        t = r.get("target")
        target = f"{t['metric']} {_target_bound(t)}" if t else "(report only)"
        met = ("yes" if t["met"] else "**no**") if t else ""
        fe = r.get("false_entailment_rate")
        rows.append(
            [
                r["title"],
                f"{r['n']:,}",
                f"{100 * r['accuracy']:.1f}",
                f"{r['macro_f1']:.3f}",
                f"{100 * fe:.1f}" if fe is not None else "",
                target,
                met,
                f"{r['pairs_per_s']:.0f}",
            ]
        )
    head = ["set", "n", "accuracy", "macro-F1", "false entailment %", "target", "met", "pairs/s"]
    lines = [f"Command: `{command}`", "", *markdown_table(head, rows, align="lrrrrllr")]
    if speed:
        runs = speed.get("runs") or f"batch {speed['batch_size']}"
        lines += [
            "",
            f"Speed: {speed['pairs_per_s']:.0f} pairs/s on {speed['pairs']} pairs of "
            f"{speed['mean_tokens']:.0f} tokens on average, {runs} (median of 3 runs; "
            f"target >= 100); load {speed['load_s']:.2f} s (median of 3; target < 2 s): "
            f"{'met' if speed['met'] else '**not met**'}.",
        ]
    return "\n".join(lines) + "\n"


def _target_bound(t: dict[str, Any]) -> str:
    return f">= {t['at_least']}" if "at_least" in t else f"<= {t['at_most']}"


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
