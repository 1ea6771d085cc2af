"""Every recorded case of `ragmend bench detect` diagnosed once, each Diagnosis written whole as one
JSON line: the "before" and "after" of a change to diagnosis/ that must not change a diagnosis
(compare two snapshots with bench/studies/diagnosis_compare.py).

    cd /tmp && PYTHONPATH=/work/baseline /work/main/.venv/bin/python \\
        /work/main/bench/studies/diagnosis_snapshot.py --workdir /work/detect --split test \\
        --sets hotpotqa,unanswerable,fever --out /work/snapshots/before-test-qa.jsonl

The cases are diagnosed as `ragmend bench detect` diagnoses them (cli/bench.py, bench_detect;
bench/suites/detect.py, _run_case): the same settings (the invocation's, `--config`/`--data-dir`
and RAGMEND_* as the CLI reads them, pointed at the workdir's workspace, kg off, no repair), the
index of the workdir opened with the embeddings, reranker and NLI roles where generated answers
are among the sets, and the same call: `engine.diagnoser.diagnose(query, passages, response,
token_logprobs=...)`. Nothing is generated: hotpotqa and unanswerable are the answers already in
<workdir>/answers-<split>.jsonl (every one recorded there, in file order; make them with `ragmend
bench detect --workdir ...`), ragtruth and fever are read from the data (`--limit N`: the first N
of bench detect's fixed pseudo-random order of each; for the generated sets the first N recorded).

Each line: {"set", "id", "diagnosis"}, the diagnosis as Diagnosis.as_dict() (dataclasses.asdict)
with every key named "timings" removed at any depth, written with sort_keys so that two runs of the
same code give the same bytes. Where the code is imported from (ragmend.__file__) goes to stderr
first: put the tree to measure first on PYTHONPATH and run from a directory outside the checkouts.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragmend.settings import Settings, load_settings

if TYPE_CHECKING:
    from ragmend.corpora.readers import Split

GENERATED = ("hotpotqa", "unanswerable")
GIVEN = ("ragtruth", "fever")
# The order bench detect diagnoses the sets in (the order bench.suites.answers.case_sets builds them).
ORDER = ("ragtruth", "hotpotqa", "unanswerable", "fever")
DROPPED = "timings"
DIAGNOSIS_ROLES = ("embeddings", "reranker", "nli")  # what bench detect loads for generated answers


def plain(value: Any) -> Any:
    """`value` as plain JSON values (dataclasses, pydantic models, numpy values and tuples
    converted), with every mapping key named "timings" left out at any depth."""
    if is_dataclass(value) and not isinstance(value, type):
        value = asdict(value)
    elif hasattr(value, "model_dump"):
        value = value.model_dump()
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items() if k != DROPPED}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if hasattr(value, "tolist"):  # numpy scalars and arrays
        return plain(value.tolist())
    return value


def snapshot_line(set_name: str, case_id: str, diagnosis: Any) -> str:
    d = diagnosis.as_dict() if hasattr(diagnosis, "as_dict") else diagnosis
    row = {"set": set_name, "id": case_id, "diagnosis": plain(d)}
    return json.dumps(row, sort_keys=True, ensure_ascii=False) + "\n"


def chosen_sets(text: str) -> list[str]:
    names = [s.strip() for s in text.split(",") if s.strip()]
    unknown = sorted(set(names) - set(ORDER))
    if unknown or not names:
        raise SystemExit(f"unknown data sets {unknown or names}; choose from {', '.join(ORDER)}")
    return [s for s in ORDER if s in names]


def load_cases(
    workspace: Any, data_root: Path, split: Split, sets: Sequence[str], limit: int | None
) -> list[Any]:
    """The cases of `sets` in bench detect's order, without a model."""
    from ragmend.bench.suites.answers import case_sets, recorded_cases

    given = [s for s in sets if s in GIVEN]
    by_set: dict[str, list[Any]] = (
        dict(case_sets(None, workspace, data_root, split, given, limit)) if given else {}
    )
    generated = [s for s in sets if s in GENERATED]
    if generated:
        recorded = recorded_cases(workspace, data_root, split, generated)
        for name in generated:
            cases = [c for (s, _), c in recorded.items() if s == name]
            if not cases:
                path = workspace.root / f"answers-{split}.jsonl"
                raise SystemExit(f"no {name} answers recorded in {path}: run `ragmend bench detect` first")
            by_set[name] = cases[:limit] if limit else cases
    return [c for name in sets for c in by_set.get(name, [])]


def main(argv: Sequence[str] | None = None, settings: Callable[[], Settings] = load_settings) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--workdir", type=Path, required=True, help="bench detect's --workdir (answers, index)")
    ap.add_argument("--split", choices=("dev", "test"), required=True)
    ap.add_argument(
        "--sets", default="hotpotqa,unanswerable,fever", help="comma-separated: " + ", ".join(ORDER)
    )
    ap.add_argument("--limit", type=int, default=None, help="at most N cases of each set")
    ap.add_argument("--out", type=Path, required=True, help="the snapshot (JSONL)")
    ap.add_argument("--data-root", type=Path, default=Path("/work/shared/data"), help="the shared data")
    args = ap.parse_args(argv)
    sets = chosen_sets(args.sets)
    t0 = time.perf_counter()

    import ragmend
    import ragmend.diagnosis.diagnoser as diagnoser_module

    print(f"ragmend: {ragmend.__file__}\ndiagnoser: {diagnoser_module.__file__}", file=sys.stderr)

    # The settings as the CLI read them (its global options), the engine as bench detect builds it.
    from ragmend.bench.suites.answers import detector_engine

    ws, engine = detector_engine(settings(), args.workdir, args.data_root)
    cases = load_cases(ws, args.data_root, args.split, sets, args.limit)
    counts = {name: sum(c.set == name for c in cases) for name in sets}
    print(f"cases: {counts}", file=sys.stderr)
    print(
        "settings: "
        + json.dumps(
            {
                "diagnosis": engine.settings.diagnosis.model_dump(mode="json"),
                "models": {
                    "nli": engine.settings.models.nli.model_dump(mode="json"),
                    "embeddings": engine.settings.models.embeddings.model_dump(mode="json"),
                    "reranker": engine.settings.models.reranker.model_dump(mode="json"),
                },
            },
            sort_keys=True,
        ),
        file=sys.stderr,
    )
    if set(GENERATED) & set(sets):
        # As bench detect: the generated answers' passages are the index's (stored vectors, titles).
        engine.load(roles=DIAGNOSIS_ROLES)
    diagnoser = engine.diagnoser
    print(f"loaded in {time.perf_counter() - t0:.1f} s", file=sys.stderr)

    args.out.parent.mkdir(parents=True, exist_ok=True)
    partial = args.out.with_name(args.out.name + ".partial")
    t1 = time.perf_counter()
    with open(partial, "w", encoding="utf-8") as out:
        for n, case in enumerate(cases, start=1):
            d = diagnoser.diagnose(
                case.query, case.passages, case.response, token_logprobs=case.token_logprobs
            )
            out.write(snapshot_line(case.set, case.id, d))
            if n % 100 == 0 or n == len(cases):
                out.flush()
                print(f"{n}/{len(cases)} in {time.perf_counter() - t1:.1f} s", file=sys.stderr)
    os.replace(partial, args.out)
    # Every ragmend module must come from the tree ragmend itself came from (not an editable install's).
    tree = Path(ragmend.__file__).resolve().parent.parent
    strays = sorted(
        name
        for name, module in list(sys.modules.items())
        if name.startswith("ragmend")
        and getattr(module, "__file__", None)
        and not Path(str(module.__file__)).resolve().is_relative_to(tree)
    )
    if strays:
        print(f"warning: {len(strays)} ragmend modules from outside {tree}: {strays[:5]}", file=sys.stderr)
    else:
        print(f"every ragmend module loaded came from {tree}", file=sys.stderr)
    print(
        f"wrote {len(cases)} diagnoses to {args.out} ({time.perf_counter() - t0:.1f} s in all)",
        file=sys.stderr,
    )
    return 0
