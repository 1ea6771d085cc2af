"""An evaluation workspace: one task's corpus, index, graph and generation cache in one directory.

    ws = Workspace(get_task("fever"), Path("var/eval/fever"), Path("../shared/data"))
    items = ws.prepare()                       # corpus.jsonl (+ corpus.md), rewritten only on change
    engine = Engine(ws.settings(base))         # sources = the corpus; the index builds on load()

The index and the graph are synchronised incrementally by the engine (ingest fingerprints), so a
second run over the same workspace opens them; the generation cache makes reruns cheap and lets an
interrupted run resume (ragmend/models/generation_cache.py; ragmend/clock.py keeps its timings
honest).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from ragmend.corpora.tasks import Corpus, EvalItem, Task
from ragmend.fileio import atomic_write_text
from ragmend.settings import Settings, settings_with


class Workspace:
    def __init__(self, task: Task, root: Path, data_root: Path):
        self.task = task
        self.root = Path(root).expanduser()
        self.data_root = Path(data_root)
        self.corpus: Corpus | None = None

    @property
    def corpus_path(self) -> Path:
        return self.root / "corpus.jsonl"

    @property
    def cache_path(self) -> Path:
        return self.root / "generations.sqlite"

    def prepare(self) -> list[EvalItem]:
        """Every item of the task (both splits); writes the corpus file when its content changed."""
        items, corpus = self.task.load(self.data_root)
        self.root.mkdir(parents=True, exist_ok=True)
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in corpus.rows())
        if not self.corpus_path.exists() or _digest(self.corpus_path.read_bytes()) != _digest(text.encode()):
            atomic_write_text(self.corpus_path, text)
        atomic_write_text(self.root / "corpus.md", corpus.description + "\n")
        self.corpus = corpus
        return items

    def settings(self, base: Settings, **sections: Any) -> Settings:
        """`base` pointed at this workspace: its corpus as the only source, the task's prompt and
        generation length, the generation cache; `sections` override further (e.g. policy=...)."""
        generation = {"cache": str(self.cache_path), "max_tokens": self.task.max_tokens}
        models: dict[str, Any] = {"generator": generation}
        if base.models.escalation is not None:  # the stronger generator answers like the first
            models["escalation"] = generation
        ws: dict[str, Any] = {"rag": {"prompt": self.task.prompt}, "models": models}
        pointed = settings_with(base, data_dir=str(self.root), sources=[str(self.corpus_path)], **ws)
        return settings_with(pointed, **sections) if sections else pointed


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
