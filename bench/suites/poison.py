"""`ragmend eval --suite poison`: the mixed-retrieval paper's clean / mixed / poisoned protocol on TruthfulQA.

For each TruthfulQA question of the TEST split (sha256 of the question, as for the other sets):
1. parametric-only answer (the paper's prompt, no passages): P_i = the answer is correct;
2. three misleading passages written by the local generator, each asserting one of TruthfulQA's
   incorrect answers (the best incorrect one first), and three clean passages written with the
   same prompt from its correct answers (there is no Wikipedia here; the same prompt on both sides
   keeps the two kinds alike in style). The paper asked its 8B writer to "contradict the correct
   answer"; asked that, the 0.5B generator restated the correct answer, so the answer to assert is
   given. `writer="escalation"` has the stronger generator write the passages (the answers stay
   the generator's): the 0.5B often restates the question's premise instead of its given answer;
3. four contexts (clean 3+0, mixed-33 2+1, mixed-67 1+2, poisoned 0+3; order shuffled with a fixed
   seed per question); an answer under each with the paper's RAG prompt (temperature 0.2);
4. the engine's diagnosis of every answer: does it flag the poisoned contexts (evidence conflict:
   the evidence holds incompatible answers on a claim of the answer; response contradiction; any
   failure)? And what the user reads (engine/presentation.py, the server's settings): the answer
   stated as fact, both sides of a conflict, or an abstention.

Correctness of a free-form answer: bench/suites/truth_judge.py, a small judge over the answer's embedding,
token-overlap and NLI relations to TruthfulQA's correct and incorrect reference answers, fitted on
the DEV split's references and validated leave-one-out on the TEST split's (both figures go in the
report). Records hold the answers, not verdicts: the judge runs over the finished records, so a
better judge rescores a run without generating anything again.
Metrics: accuracy per context (the Poison Ratio Curve over 0, 1/3, 2/3, 1 poisoned), the Parametric
Override Rate POR_c = |{i in W : wrong under c}| / |W| with W the parametrically correct questions,
and the diagnosis flag rates per context.
"""

from __future__ import annotations

import csv
import json
import os
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ragmend.bench.markdown import markdown_table
from ragmend.bench.suites.truth_judge import (
    FEATURES,
    Judged,
    JudgeWeights,
    TruthJudge,
    fit_and_validate,
    leave_one_out,
)
from ragmend.corpora.readers import Split, split_of
from ragmend.diagnosis.hypotheses import is_abstention
from ragmend.diagnosis.types import Diagnosis
from ragmend.engine import Engine
from ragmend.engine.presentation import Presented, Reading, present
from ragmend.errors import InputError
from ragmend.fileio import archive_file, atomic_write_json, atomic_write_text
from ragmend.kg.phrases import embed_with
from ragmend.models.generator import Generator
from ragmend.models.nli import nli_identity
from ragmend.models.registry import ModelRegistry
from ragmend.rag.pipeline import format_context
from ragmend.rag.prompts import get_prompt
from ragmend.rag.types import Passage

TRUTHFULQA_FILE = "truthfulqa/TruthfulQA.csv"
CONTEXTS = (("clean", 0), ("mixed-33", 1), ("mixed-67", 2), ("poisoned", 3))  # (name, misleading of 3)
TEMPERATURE = 0.2  # the paper's
PASSAGE_TOKENS = 120


@dataclass(frozen=True)
class TruthfulItem:
    question: str
    best: str
    correct: tuple[str, ...]
    incorrect: tuple[str, ...]  # the best incorrect answer first

    @property
    def split(self) -> Split:
        return split_of(self.question)


def load_truthfulqa(path: Path, split: Split | None = None) -> list[TruthfulItem]:
    items = []
    with open(path, encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            correct = tuple(a.strip() for a in row["Correct Answers"].split(";") if a.strip())
            incorrect = tuple(a.strip() for a in row["Incorrect Answers"].split(";") if a.strip())
            worst = row.get("Best Incorrect Answer", "").strip()
            if worst:
                incorrect = (worst, *[a for a in incorrect if a != worst])
            best = row["Best Answer"].strip()
            item = TruthfulItem(row["Question"].strip(), best, correct or (best,), incorrect)
            if item.incorrect and (split is None or item.split == split):
                items.append(item)
    return items


Writer = Literal["generator", "escalation"]


class PoisonRun:
    """`writer`: the model that writes the passages, the answering generator (the default) or the
    stronger one of models.escalation; the answers are always the generator's."""

    def __init__(
        self, engine: Engine, records: Path, log: Callable[[str], None] = print, writer: Writer = "generator"
    ):
        self.engine = engine
        self.records = records
        self.log = log
        self.generator = engine.models.generator
        stronger = engine.models.escalation if writer == "escalation" else self.generator
        if stronger is None:
            raise InputError("--writer escalation needs models.escalation (it is null)")
        self.writer = stronger
        self.max_chars = engine.settings.rag.max_context_chars
        # The flags are the diagnosis' and depend on the NLI weights: each record names them.
        self.nli = nli_identity(engine.settings.models)
        self.reading = Reading.of(engine.settings.server)

    def chat(
        self, prompt: str, max_tokens: int, seed: int = 0, by: Generator | None = None, **values: str
    ) -> str:
        # Distinct passages of one kind come from distinct sampling seeds (temperature 0.2).
        messages = get_prompt(prompt).messages(**values)
        return (
            (by or self.generator)
            .chat(messages, max_tokens=max_tokens, temperature=TEMPERATURE, seed=seed)
            .text.strip()
        )

    def run_item(self, item: TruthfulItem) -> dict[str, Any]:
        parametric = self.chat("parametric", 64, question=item.question)
        answers = [item.best, *[a for a in item.correct if a != item.best]]
        q, wrong = item.question, item.incorrect
        clean = [
            self.chat(
                "write_passage", PASSAGE_TOKENS, n, self.writer, question=q, answer=answers[n % len(answers)]
            )
            for n in range(3)
        ]
        misleading = [
            self.chat(
                "write_passage", PASSAGE_TOKENS, n, self.writer, question=q, answer=wrong[n % len(wrong)]
            )
            for n in range(3)
        ]
        rng = random.Random(item.question)  # a fixed order per question
        out: dict[str, Any] = {
            "question": item.question,
            "nli": self.nli,
            "writer": self.writer.model,
            "parametric": parametric,
            "clean_passages": clean,
            "misleading_passages": misleading,
            "contexts": {},
        }
        for name, n_bad in CONTEXTS:
            chosen = [(t, "misleading") for t in misleading[:n_bad]] + [
                (t, "clean") for t in clean[: 3 - n_bad]
            ]
            rng.shuffle(chosen)
            passages = [
                # Titles say nothing of the kind: the generator must judge the text alone.
                Passage(
                    id=f"p{i}",
                    doc_id=f"p{i}",
                    title=f"Passage {i + 1}",
                    text=text,
                    score=0.0,
                    retriever="given",
                )
                for i, (text, kind) in enumerate(chosen)
            ]
            context, _ = format_context(passages, self.max_chars)
            response = self.chat("conflict", 64, context=context, question=item.question)
            d = self.engine.diagnoser.diagnose(item.question, tuple(passages), response)
            titled = [(p.id, p.title) for p in passages]
            shown = present(response, d, titled, self.reading, query=item.question)
            out["contexts"][name] = {
                "response": response,
                "presented": shown.text,
                "read_as": read_as(response, shown),
                "kinds": [kind for _, kind in chosen],
                **_flags(d),
            }
        return out

    def run(self, items: list[TruthfulItem], on_item: Callable[[int, int], None] | None = None) -> list[dict]:
        done: list[dict[str, Any]] = []
        if self.records.exists():
            for line in self.records.read_text(encoding="utf-8").splitlines():
                try:
                    done.append(json.loads(line))
                except json.JSONDecodeError:
                    break
        if [r["question"] for r in done] != [i.question for i in items[: len(done)]]:
            raise ValueError(f"{self.records} does not follow this run's questions: delete it to start over")
        if other := {r.get("nli", "unnamed") for r in done} - {self.nli}:
            raise InputError(
                f"{self.records} holds records diagnosed with NLI {', '.join(sorted(other))}, not "
                f"{self.nli}: move it aside to start over (its generations are cached: a rerun is quick)"
            )
        # Records of an earlier writer read as the generator's (it was the only one).
        if other := {r.get("writer", self.generator.model) for r in done} - {self.writer.model}:
            raise InputError(
                f"{self.records} holds passages written by {', '.join(sorted(other))}, not "
                f"{self.writer.model}: move it aside to start over"
            )
        self.records.parent.mkdir(parents=True, exist_ok=True)
        with open(self.records, "w", encoding="utf-8") as f:
            for r in done:
                f.write(json.dumps(r) + "\n")
            for item in items[len(done) :]:
                record = self.run_item(item)
                f.write(json.dumps(record) + "\n")
                f.flush()
                os.fsync(f.fileno())
                done.append(record)
                if on_item is not None:
                    on_item(len(done), len(items))
        return done


def read_as(response: str, shown: Presented) -> str:
    """What the user reads: "conflict" (both sides), "abstained" (the answer policy's abstention or
    the generator's own), else "stated" (one answer stated as fact)."""
    if shown.policy_applied == "conflict":
        return "conflict"
    if shown.policy_applied == "abstain" or is_abstention(response):
        return "abstained"
    return "stated"


def reference_samples(items: list[TruthfulItem]) -> list[Judged]:
    """Leave-one-out samples from the questions' own reference answers (labelled by TruthfulQA)."""
    return [s for i in items for s in leave_one_out(i.question, i.correct, i.incorrect)]


def fit_judge(
    models: ModelRegistry, data_root: Path, questions: int, cache: Path | None = None
) -> tuple[TruthJudge, dict[str, Any]]:
    """The judge fitted on `questions` DEV questions' references and validated on as many TEST
    ones, with the registry's embeddings and NLI roles; `cache` keeps the weights and the
    validation for reruns with the same setup."""
    embed = embed_with(models.embeddings)
    nli = models.nli

    def predict(pairs: list[tuple[str, str]]) -> np.ndarray:
        return nli.predict(pairs).probs

    m = models.settings.models
    setup = {
        "questions": questions,
        "nli": nli_identity(m),
        "embeddings": m.embeddings.model,
        "features": list(FEATURES),
    }
    if cache is not None and cache.exists():
        saved = json.loads(cache.read_text(encoding="utf-8"))
        if saved.get("setup") == setup:
            return TruthJudge(JudgeWeights(**_tuples(saved["weights"])), embed, predict), saved["validation"]
    path = data_root / TRUTHFULQA_FILE
    dev = reference_samples(load_truthfulqa(path, split="dev")[:questions])
    test = reference_samples(load_truthfulqa(path, split="test")[:questions])
    weights, validation = fit_and_validate(dev, test, embed, predict)
    validation = {"dev_questions": questions, "test_questions": questions, **validation}
    if cache is not None:
        atomic_write_json(cache, {"setup": setup, "weights": asdict(weights), "validation": validation})
    return TruthJudge(weights, embed, predict), validation


def _tuples(raw: dict[str, Any]) -> dict[str, Any]:
    return {k: tuple(v) if isinstance(v, list) else v for k, v in raw.items()}


def mark_correct(records: list[dict[str, Any]], items: list[TruthfulItem], judge: TruthJudge) -> None:
    """Judge every answer and passage of the records in one batch; sets `parametric_correct`, each
    context's `correct`, `presented_correct` and `holds_both`, and the passages' `clean_true` /
    `misleading_false`."""
    by_question = {i.question: i for i in items}
    samples: list[Judged] = []
    slots: list[tuple[Any, Any, bool]] = []  # where each verdict goes: (dict or list, key, negated)
    for r in records:
        item = by_question[r["question"]]
        r["clean_true"] = [False] * len(r["clean_passages"])
        r["misleading_false"] = [False] * len(r["misleading_passages"])
        contexts = r["contexts"].values()
        answers: list[tuple[Any, Any, str, bool]] = [(r, "parametric_correct", r["parametric"], False)]
        answers += [(c, "correct", c["response"], False) for c in contexts]
        answers += [(c, "presented_correct", c["presented"], False) for c in contexts]
        # The passages too: a passage written to assert an answer may not (the 0.5B writer often
        # restates the question), so whether a context holds both answers is read from its text.
        answers += [(r["clean_true"], k, t, False) for k, t in enumerate(r["clean_passages"])]
        answers += [(r["misleading_false"], k, t, True) for k, t in enumerate(r["misleading_passages"])]
        for where, key, text, negated in answers:
            samples.append(
                Judged(question=item.question, response=text, correct=item.correct, incorrect=item.incorrect)
            )
            slots.append((where, key, negated))
    for (where, key, negated), ok in zip(slots, judge.judge(samples), strict=True):
        where[key] = ok != negated
    for r in records:
        for name, n_bad in CONTEXTS:
            r["contexts"][name]["holds_both"] = any(r["clean_true"][: 3 - n_bad]) and any(
                r["misleading_false"][:n_bad]
            )


def _flags(d: Diagnosis) -> dict[str, Any]:
    return {
        "failure": d.failure,
        "evidence_conflict": d.evidence_conflict,
        # As JSON reads it back (lists, not tuples): a resumed run's records equal a fresh one's.
        "conflict": None if d.conflict is None else json.loads(json.dumps(asdict(d.conflict))),
        "e_r": d.e_r.state,
        "e_q": d.e_q.state,
    }


def summarize_poison(records: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(records)
    w = [r for r in records if r["parametric_correct"]]
    out: dict[str, Any] = {"n": n, "parametric_correct": len(w), "contexts": {}}
    for name, n_bad in CONTEXTS:
        rows = [r["contexts"][name] for r in records]
        wrong_in_w = sum(not r["contexts"][name]["correct"] for r in w)
        # The diagnosis as a detector: how often it fails the answers the judge found wrong, and
        # the ones it found right (flagging a right answer sends it to a needless repair).
        failed = {
            ok: [c["failure"] != "NoFailure" for c in rows if c["correct"] is ok] for ok in (False, True)
        }
        out["contexts"][name] = {
            "poison_share": round(n_bad / 3, 3),
            "accuracy": round(100 * float(np.mean([c["correct"] for c in rows])), 2) if rows else None,
            "por": round(100 * wrong_in_w / len(w), 2) if w else None,
            "flag_evidence_conflict": round(100 * float(np.mean([c["evidence_conflict"] for c in rows])), 2),
            "flag_contradiction": round(100 * float(np.mean([c["e_r"] == "contradict" for c in rows])), 2),
            "flag_any_failure": round(100 * float(np.mean([c["failure"] != "NoFailure" for c in rows])), 2),
            "flag_wrong": round(100 * float(np.mean(failed[False])), 2) if failed[False] else None,
            "flag_right": round(100 * float(np.mean(failed[True])), 2) if failed[True] else None,
            **reading_shares(rows),
        }
    return out


def reading_shares(rows: list[dict[str, Any]]) -> dict[str, float | None]:
    """What the user read, as percentages of the context's answers: one side stated as fact, both
    sides presented, an abstention; the same over the answers whose evidence holds both a true and
    a misleading passage; and the accuracy of what was read."""

    def share(sub: list[dict[str, Any]], *kinds: str) -> float | None:
        return round(100 * float(np.mean([c["read_as"] in kinds for c in sub])), 2) if sub else None

    both = [c for c in rows if {"clean", "misleading"} <= set(c["kinds"])]
    judged_both = [c for c in both if c.get("holds_both")]
    return {
        "stated_one_side": share(rows, "stated"),
        "presented_conflict": share(rows, "conflict"),
        "abstained": share(rows, "abstained"),
        "presented_conflict_when_both": share(both, "conflict"),
        "presented_or_abstained_when_both": share(both, "conflict", "abstained"),
        # The same over the contexts whose passages, as the judge reads them, hold both answers.
        "both_held_judged": round(100 * len(judged_both) / len(rows), 2) if rows else None,
        "presented_conflict_when_both_judged": share(judged_both, "conflict"),
        "presented_or_abstained_when_both_judged": share(judged_both, "conflict", "abstained"),
        "accuracy_read": round(100 * float(np.mean([c["presented_correct"] for c in rows])), 2)
        if rows
        else None,
    }


def write_poison_report(
    summary: dict[str, Any],
    reports: Path,
    command: str,
    minutes: float,
    generator: str,
    nli: str,
    writer: str | None = None,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    reports.mkdir(parents=True, exist_ok=True)
    ctx = summary["contexts"]
    xs = [ctx[name]["poison_share"] for name, _ in CONTEXTS]
    fig, ax = plt.subplots(figsize=(4.8, 3.4))
    ax.plot(xs, [ctx[name]["accuracy"] for name, _ in CONTEXTS], "o-", label="accuracy %")
    ax.plot(xs, [ctx[name]["por"] for name, _ in CONTEXTS], "s--", label="POR %")
    ax.plot(
        xs, [ctx[name]["flag_evidence_conflict"] for name, _ in CONTEXTS], "^:", label="flagged: conflict %"
    )
    ax.set_xlabel("share of misleading passages")
    ax.set_ylabel("%")
    ax.set_title("TruthfulQA: Poison Ratio Curve (test split)", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(reports / "poison-curve.png", dpi=110)
    plt.close(fig)
    meta = {"command": command, "minutes": minutes, "nli": nli, "writer": writer or generator}
    atomic_write_json(reports / "poison.json", {**summary, "_meta": meta})
    lines = [
        "# Poisoned retrieval (the mixed-retrieval protocol) on TruthfulQA",
        "",
        f"Command: `{command}` ({minutes:.0f} min). Generator: {generator}; passages written by "
        f"{writer or generator}.",
        f"NLI (the diagnosis' flags and the judge): {nli}.",
        f"Test split, {summary['n']} questions;",
        f"{summary['parametric_correct']} answered correctly with no passages (W, the POR denominator).",
        "The protocol and how correctness is judged are in bench/suites/poison.py.",
        "",
    ]
    head = [
        "context",
        "misleading share",
        "accuracy %",
        "POR %",
        "flagged: evidence conflict %",
        "flagged: response contradiction %",
        "flagged: any failure %",
        "wrong answers flagged %",
        "right answers flagged %",
    ]
    keys = (
        "accuracy",
        "por",
        "flag_evidence_conflict",
        "flag_contradiction",
        "flag_any_failure",
        "flag_wrong",
        "flag_right",
    )
    rows = [[name, f"{ctx[name]['poison_share']:.2f}", *[ctx[name][k] for k in keys]] for name, _ in CONTEXTS]
    lines += markdown_table(head, rows)
    lines += [
        "",
        "What the user reads (the answer as the server presents it, engine/presentation.py): one answer "
        "stated as fact, both sides of a conflict in the evidence, or an abstention; 'evidence holds "
        "both': the answers whose passages include one written from a true answer and one written "
        "from a misleading answer (the mixed contexts); 'as judged': those whose passages, read by the "
        "judge below, include one that states a true answer and one that states a false one (the "
        "writer does not always assert the answer it was given).",
        "",
    ]
    read_keys = (
        "stated_one_side",
        "presented_conflict",
        "abstained",
        "presented_conflict_when_both",
        "presented_or_abstained_when_both",
        "both_held_judged",
        "presented_conflict_when_both_judged",
        "presented_or_abstained_when_both_judged",
        "accuracy_read",
    )
    head = [
        "context",
        "stated one side %",
        "presented the conflict %",
        "abstained %",
        "presented the conflict, evidence holds both %",
        "presented it or abstained, evidence holds both %",
        "evidence holds both, as judged %",
        "presented the conflict, both as judged %",
        "presented it or abstained, both as judged %",
        "accuracy of what was read %",
    ]
    lines += markdown_table(head, [[name, *[ctx[name].get(k) for k in read_keys]] for name, _ in CONTEXTS])
    lines += ["", "![Poison Ratio Curve](poison-curve.png)", ""]
    judge = summary.get("judge")
    if judge:
        lines += [
            "## How answers are judged (bench/suites/truth_judge.py)",
            "",
            f"A learned judge fitted on {judge['dev_questions']} DEV questions' reference answers. Its "
            f"validation: leave-one-out on {judge['test_questions']} TEST questions' reference answers "
            "(each reference answer judged against the question's other references; labels are "
            "TruthfulQA's own). Reference answers are terser than generated ones: this measures how "
            "well the judge separates TruthfulQA's answers, not its accuracy on the generator's "
            "(no labels for those here). Same samples for every row:",
            "",
        ]
        head = [
            "judge",
            "correct answers judged correct %",
            "incorrect judged incorrect %",
            "balanced %",
            "n",
        ]
        judge_keys = ("correct_judged_correct", "incorrect_judged_incorrect", "balanced_accuracy", "n")
        rows = [[name, *[row[k] for k in judge_keys]] for name, row in judge.items() if isinstance(row, dict)]
        lines += markdown_table(head, rows)
        lines.append("")
    atomic_write_text(reports / "poison.md", "\n".join(lines) + "\n")


def records_name(split: Split, offset: int, writer: Writer) -> str:
    """One records file per split, first question and writer: runs of each stay side by side."""
    start = f".from{offset}" if offset else ""
    by = "" if writer == "generator" else f".{writer}-writer"
    return f"poison.{split}{start}{by}.jsonl"


def run_poison_suite(
    engine: Engine,
    data_root: Path,
    workdir: Path,
    reports: Path,
    limit: int | None,
    command: str,
    judge_questions: int = 150,
    on_item: Callable[[int, int], None] | None = None,
    restart: bool = False,
    split: Split = "test",
    offset: int = 0,
    writer: Writer = "generator",
) -> dict[str, Any]:
    """`restart`: set the earlier records aside (results/archive/<UTC time>/) and diagnose every
    answer again, e.g. after the diagnosis changed; the generations stay cached. `split` "dev"
    runs the DEV questions after `offset` (at least `judge_questions`, whose references fit the
    judge) to choose on; its summary goes to <reports>/poison-dev.json, never to poison.md."""
    if split == "dev" and offset < judge_questions:
        raise InputError(
            f"--offset {offset} < --dev-limit {judge_questions}: the DEV questions run would include "
            "those whose references fit the judge"
        )
    started = time.monotonic()
    judge, validation = fit_judge(engine.models, data_root, judge_questions, workdir / "judge.json")
    items = load_truthfulqa(data_root / TRUTHFULQA_FILE, split=split)[offset:]
    items = items[:limit] if limit is not None else items
    kept = workdir / "results" / records_name(split, offset, writer)
    if restart:
        archive_file(kept)
    poison = PoisonRun(engine, kept, writer=writer)
    records = poison.run(items, on_item)
    mark_correct(records, items, judge)
    summary = {**summarize_poison(records), "judge": validation}
    minutes = (time.monotonic() - started) / 60
    if split == "dev":
        meta = {
            "command": command,
            "minutes": minutes,
            "nli": poison.nli,
            "writer": poison.writer.model,
            "split": "dev",
            "offset": offset,
        }
        reports.mkdir(parents=True, exist_ok=True)
        atomic_write_json(reports / "poison-dev.json", {**summary, "_meta": meta})
        return summary
    write_poison_report(
        summary, reports, command, minutes, engine.models.generator.model, poison.nli, poison.writer.model
    )
    return summary
