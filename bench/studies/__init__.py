"""DEV studies: one-off measurements behind a setting or a figure in docs/ and reports/, each a
module with `main(argv) -> int`, run as `ragmend study <name> [its options]` (`ragmend study
--list` names them). The evaluation harness's engine set-up is theirs too (bench/harness/item_runs.py,
bench/suites/answers.py); none is part of a served request.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable, Sequence

from ragmend.settings import Settings

# name -> (module under ragmend.bench.studies, what it measures)
STUDIES: dict[str, tuple[str, str]] = {
    "abstention": ("abstention", "unanswerable questions: the share abstained, and right answers lost"),
    "api-snapshot": ("api_snapshot", "what a client of both HTTP APIs receives on fixed requests, masked"),
    "answer-backing": ("answer_backing", "how well NLI support alone separates wrong answers from right"),
    "answerable-ie": (
        "answerable_ie_by_gold",
        "answerable questions typed IE, by gold paragraphs retrieved",
    ),
    "conflict-separability": (
        "conflict_separability",
        "how well the NLI's contradiction tells incompatible TruthfulQA answers from compatible ones",
    ),
    "diagnosis-compare": ("diagnosis_compare", "two diagnosis snapshots compared, case by case"),
    "diagnosis-snapshot": (
        "diagnosis_snapshot",
        "every recorded case of bench detect, diagnosed",
    ),
    "label-audit": ("label_audit", "bench detect's figures under a person's reading of the answers"),
    "prompt-budget": ("prompt_budget", "Naive RAG's answers under several evidence budgets of the prompt"),
    "replace-point": ("replace_point", "how sure a flag must be to replace an answer, chosen by cost"),
    "repair-arms": ("repair_arms", "what each repair action alone does to each DEV answer"),
    "rules": ("rule_ledger", "each decision rule: right answers it flags, wrong ones it alone catches"),
    "select-answer": ("select_answer", "whether the diagnosis can pick a right answer from the evidence"),
    "trust": (
        "trust",
        "TEST: right answers flagged and read away, abstentions read, into reports/trust.json",
    ),
}


def run(name: str, argv: Sequence[str], settings: Callable[[], Settings]) -> int:
    """Run study `name` with its own command-line options; KeyError for an unknown name.
    `settings`: the configuration as the command line reads it, for a study that takes it."""
    module, _ = STUDIES[name]
    main = importlib.import_module(f"ragmend.bench.studies.{module}").main
    program = sys.argv[0]
    sys.argv[0] = f"ragmend study {name}"  # what argparse names in its usage and errors
    try:
        takes = "settings" in inspect.signature(main).parameters
        code: int = main(list(argv), settings=settings) if takes else main(list(argv))
    finally:
        sys.argv[0] = program
    return code
