"""Training the hallucination detector (`ragmend detector train`, `make detector-model`): a token
classifier on MiniLM-L6 (from its wheel) over the rows of `ragmend detector data`.

Each row is one model input: the source window that best covers the response beside the
response's first part (ragmend/models/detector.py, the same windows inference reads). Two losses:
- per token, where the row says where it is unsupported (its spans; a supported row: nowhere):
  cross-entropy on the response's tokens;
- per response, on every row: the response's highest token score against whether it is
  unsupported (binary cross-entropy on the max-pooled logit margin), which is all a row whose
  spans are unknown (BEGIN's, FaithDial's) teaches.
Resumable: a checkpoint every `checkpoint_every` steps (train/checkpoint.py); a rerun continues.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ragmend.corpora.grounded import Grounded
from ragmend.corpora.readers import read_jsonl
from ragmend.errors import InputError
from ragmend.models import bundled
from ragmend.models.detector import Window, Windows
from ragmend.train import checkpoint

Progress = Callable[[int, int, float], None]  # (step, total steps, loss)
IGNORE = -100


@dataclass(frozen=True, kw_only=True)
class DetectorTrainConfig:
    base: str = "bundled:all-minilm-l6-v2"
    epochs: int = 2
    batch_size: int = 16
    learning_rate: float = 5e-5
    warmup_ratio: float = 0.1
    max_length: int = 384
    max_response_tokens: int = 160
    response_weight: float = 1.0  # the per-response loss beside the per-token one
    seed: int = 0
    checkpoint_every: int = 100

    def fingerprint(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Example:
    window: Window
    token_labels: list[int]  # per position: 1 unsupported, 0 supported, IGNORE unknown or not response
    unsupported: bool


def read_rows(path: Path) -> list[Grounded]:
    if not path.is_file():
        raise InputError(f"{path}: no such file (run `ragmend detector data` first)")
    return [Grounded.from_json(d) for d in read_jsonl(path)]


def oversample(rows: Sequence[Grounded], times: dict[str, int]) -> list[Grounded]:
    """Each row repeated `times[set]` times where its id names that set first ("ragtruth-..."; an
    edit of one keeps its id's head), so a small in-domain set weighs more; the rest once.

    >>> g = Grounded("ragtruth-1-added", "edit", "qa", "", ("s",), "r", True, (), "g")
    >>> len(oversample([g], {"ragtruth": 3}))
    3
    """
    return [g for g in rows for _ in range(times.get(g.id.split("-", 1)[0], 1))]


def example(windows: Windows, g: Grounded) -> Example:
    w = windows.best_window(g.question, g.source, g.response)
    labels = []
    for chars in w.response_chars:
        if chars is None or g.spans is None:
            labels.append(IGNORE)
        else:
            labels.append(int(any(a < chars[1] and chars[0] < b for a, b in g.spans)))
    return Example(w, labels, g.unsupported)


def train_detector(
    cfg: DetectorTrainConfig,
    rows: Sequence[Grounded],
    out_dir: Path,
    device: str = "cpu",
    progress: Progress | None = None,
    max_steps: int | None = None,
) -> dict[str, Any]:
    """Train and save to out_dir/model (a transformers token classifier with tokenizer.json)."""
    import torch
    from tokenizers import Tokenizer
    from transformers import AutoModelForTokenClassification, AutoTokenizer, get_linear_schedule_with_warmup

    from ragmend.models.runtime import quiet_transformers

    quiet_transformers()
    out_dir.mkdir(parents=True, exist_ok=True)
    base = (
        str(bundled.resolve_bundled(cfg.base, "embeddings").path())
        if cfg.base.startswith(bundled.BUNDLED_PREFIX)
        else cfg.base
    )
    tokenizer = AutoTokenizer.from_pretrained(base)
    windows = Windows(
        Tokenizer.from_file(str(Path(base) / "tokenizer.json")), cfg.max_length, cfg.max_response_tokens
    )
    examples = [example(windows, g) for g in rows]
    model = AutoModelForTokenClassification.from_pretrained(
        base,
        num_labels=2,
        id2label={0: "supported", 1: "unsupported"},
        label2id={"supported": 0, "unsupported": 1},
    ).to(device)
    steps_per_epoch = (len(examples) + cfg.batch_size - 1) // cfg.batch_size
    total = steps_per_epoch * cfg.epochs
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.learning_rate)
    scheduler = get_linear_schedule_with_warmup(optimizer, int(cfg.warmup_ratio * total), total)
    ckpt = out_dir / "checkpoint.pt"
    stamp = {"fingerprint": cfg.fingerprint(), "rows": len(examples)}
    step = checkpoint.resume(ckpt, stamp, model, optimizer, scheduler, device)
    torch.manual_seed(cfg.seed)
    model.train()
    order = list(range(len(examples)))
    t0, losses = time.perf_counter(), []
    while step < total and (max_steps is None or step < max_steps):
        epoch, offset = divmod(step, steps_per_epoch)
        random.Random(cfg.seed + epoch).shuffle(order)  # the same order on resume
        batch = [examples[i] for i in order[offset * cfg.batch_size : (offset + 1) * cfg.batch_size]]
        loss = _loss(torch, model, windows, batch, cfg.response_weight, device)
        checkpoint.optimizer_step(loss, model, optimizer, scheduler)
        step += 1
        losses.append(float(loss.item()))
        if progress:
            progress(step, total, losses[-1])
        if step % cfg.checkpoint_every == 0 or step == max_steps:
            checkpoint.save(ckpt, stamp, step, model, optimizer, scheduler)
    seconds = time.perf_counter() - t0
    if step < total:
        return {"finished": False, "step": step, "total_steps": total, "checkpoint": str(ckpt)}
    final = out_dir / "model"
    model.eval()
    # Inference reads windows of the size the model learned on (models/detector.py window_settings).
    model.config.update(
        {"window_max_length": cfg.max_length, "window_response_tokens": cfg.max_response_tokens}
    )
    model.save_pretrained(final)
    tokenizer.save_pretrained(final)
    (final / "train_config.json").write_text(json.dumps(asdict(cfg), indent=2))
    ckpt.unlink(missing_ok=True)
    return {
        "finished": True,
        "model": str(final),
        "rows": len(examples),
        "steps": step,
        "seconds": round(seconds, 1),
        "rows_per_s": round(len(losses) * cfg.batch_size / seconds, 1) if seconds else 0.0,
        "first_loss": round(losses[0], 4) if losses else None,
        "final_loss_mean_last_50": round(float(np.mean(losses[-50:])), 4) if losses else None,
    }


def _loss(
    torch: Any, model: Any, windows: Windows, batch: Sequence[Example], weight: float, device: str
) -> Any:
    ids, mask, types = (torch.from_numpy(a).to(device) for a in windows.batch([e.window for e in batch]))
    labels = torch.full(ids.shape, IGNORE, dtype=torch.long)
    response = torch.zeros(ids.shape, dtype=torch.bool)
    for row, e in enumerate(batch):
        labels[row, : len(e.token_labels)] = torch.tensor(e.token_labels)
        response[row, : len(e.window.response_chars)] = torch.tensor(
            [c is not None for c in e.window.response_chars]
        )
    labels, response = labels.to(device), response.to(device)
    logits = model(input_ids=ids, attention_mask=mask, token_type_ids=types).logits.float()
    loss = torch.zeros((), device=device)
    if (labels != IGNORE).any():
        loss = torch.nn.functional.cross_entropy(logits.view(-1, 2), labels.view(-1), ignore_index=IGNORE)
    margin = (logits[..., 1] - logits[..., 0]).masked_fill(~response, -1e4).max(dim=1).values
    target = torch.tensor([float(e.unsupported) for e in batch], device=device)
    return loss + weight * torch.nn.functional.binary_cross_entropy_with_logits(margin, target)
