"""What the item-by-item DEV studies (bench/studies/prompt_budget.py, repair_arms_dev.py,
select_answer_dev.py) share: their arguments, and one paper task's items answered by an engine
over its workspace with repair and the knowledge graph off (Naive RAG reads no graph: kg off
spares the half hour its build takes on 2 cores).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from ragmend.bench.harness.workspace import Workspace
from ragmend.corpora.readers import Split
from ragmend.corpora.tasks import EvalItem, Task, get_task, split_sample
from ragmend.engine import Engine
from ragmend.settings import load_settings, settings_with


def item_arguments(doc: str | None, limit: int) -> argparse.ArgumentParser:
    """The parser every study starts from: --task, --limit, --offset, --workdir, --data-root, --out."""
    ap = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    ap.add_argument("--task", default="hotpotqa")
    ap.add_argument("--limit", type=int, default=limit)
    ap.add_argument("--offset", type=int, default=0, help="skip the first N items of the split")
    ap.add_argument("--workdir", type=Path, default=Path("var/eval"))
    ap.add_argument("--data-root", type=Path, default=Path("../shared/data"))
    ap.add_argument("--out", type=Path, required=True)
    return ap


@dataclass(frozen=True)
class ItemRun:
    task: Task
    items: list[EvalItem]
    engine: Engine


def open_item_run(args: argparse.Namespace, split: Split = "dev", generation_cache: bool = True) -> ItemRun:
    """The task's items `offset` to `offset + limit` of `split` (the harness's fixed order) and a
    loaded engine over its workspace; `generation_cache` False answers every prompt afresh."""
    task = get_task(args.task)
    ws = Workspace(task, args.workdir / args.task, args.data_root)
    items = split_sample(ws.prepare(), split, args.offset + args.limit)[args.offset :]
    settings = ws.settings(load_settings(), policy={"repair": False}, kg={"enabled": False})
    if not generation_cache:
        settings = settings_with(settings, models={"generator": {"cache": None}})
    engine = Engine(settings)
    engine.load()
    return ItemRun(task, items, engine)
