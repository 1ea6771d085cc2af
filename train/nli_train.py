"""`ragmend nli train`: fine-tune a 3-way NLI cross-encoder from a data-mix file, resumably.

The mix names shared NLI sets (corpora.readers.NLI_SETS; evaluation-only sets are refused, so a
shipped model only ever sees permissively licensed data), in-domain pair files from
`ragmend nli pairs`, or any JSONL in the shared format. Training checkpoints atomically every
`checkpoint_every` steps; rerunning the same command resumes from the last checkpoint.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from ragmend.corpora.nli_pairs import lengthen_premises
from ragmend.corpora.readers import NLI_LABELS, NLI_SETS, NLIPair, load_nli, split_of
from ragmend.errors import InputError
from ragmend.fileio import atomic_write_text
from ragmend.models import bundled
from ragmend.train import checkpoint
from ragmend.train.dequantize import float_model_from_onnx

Progress = Callable[[int, int, float], None]  # (step, total steps, loss)


@dataclass(frozen=True, kw_only=True)
class MixEntry:
    source: str  # an NLI_SETS name, or a JSONL path (absolute or relative to the mix file)
    limit: int | None = None
    # Keep only pairs whose hypothesis falls in the DEV split (FEVER-derived data: the split key
    # is the claim text), so nothing of the TEST split is ever trained on.
    dev_only: bool = False
    # Show these pairs this many times per epoch (small in-domain sets next to large generic ones).
    repeat: int = 1
    # The entry's pairs with each premise set inside unrelated sentences from `filler`
    # (a pair file or set whose premises are the filler) up to this many words, labels kept
    # (corpora.nli_pairs.lengthen_premises): long premises that are not support by length.
    lengthen_to: int | None = None
    filler: str | None = None


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    base: str = "bundled:all-minilm-l6-v2"
    mix: tuple[MixEntry, ...] = field(default_factory=tuple)
    epochs: int = 1
    max_length: int = 128
    batch_size: int = 16
    learning_rate: float = 1e-4
    warmup_ratio: float = 0.06
    seed: int = 0
    bf16: bool = True
    checkpoint_every: int = 200
    # Fraction of the mix held out (by a hash of the pair, so stable across runs) for calibration
    # and an honest in-mix score; written to heldout.jsonl beside the model, never trained on.
    holdout: float = 0.05
    # Distillation: for pairs a teacher labelled (`ragmend nli label`: NLIPair.probs), the target
    # is soft_weight * teacher probabilities + (1 - soft_weight) * the pair's own label. Pairs
    # without probs train on their label alone.
    soft_weight: float = 0.5

    def fingerprint(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True, default=str).encode()).hexdigest()[:16]


def load_train_config(path: Path, **overrides: Any) -> TrainConfig:
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as e:
        raise InputError(f"cannot read training config {path}: {e}") from e
    data |= {k: v for k, v in overrides.items() if v is not None}
    try:
        mix = tuple(MixEntry(**m) for m in data.pop("mix", []))
        cfg = TrainConfig(mix=mix, **data)
    except TypeError as e:
        raise InputError(f"training config {path}: {e}") from e
    if not cfg.mix:
        raise InputError(f"training config {path}: 'mix' lists no data")
    return cfg


def trained_rows(cfg: TrainConfig, source: str) -> int | None:
    """How many leading rows of `source` (a set name or a path as the mix writes it) the mix trains
    on: 0 when it does not use it, None when it uses all of them. For a student labelled by a
    teacher trained on this mix: the rows to skip, read from the one place they are written."""
    limits = [e.limit for e in cfg.mix if e.source == source]
    if not limits:
        return 0
    return None if None in limits else max(n for n in limits if n is not None)


def shared_set_path(name: str, data_root: Path) -> Path:
    """The file of a permissive shared NLI set; evaluation-only sets are refused (data README)."""
    sets = {s.name: s for s in NLI_SETS}
    if name not in sets:
        raise InputError(f"'{name}' is neither a pair file nor a shared set ({', '.join(sets)})")
    s = sets[name]
    if not s.permissive:
        raise InputError(f"'{name}' is {s.license}: evaluation only, never trained on")
    path = data_root / s.relpath
    if not path.is_file():
        raise InputError(f"'{name}': no such file {path}")
    return path


def resolve_mix(cfg: TrainConfig, data_root: Path, relative_to: Path) -> list[NLIPair]:
    pairs: list[NLIPair] = []
    for n, entry in enumerate(cfg.mix):
        rows = _load_source(entry.source, data_root, relative_to)
        if entry.dev_only:
            rows = [p for p in rows if split_of(p.hypothesis) == "dev"]
        rows = rows[: entry.limit]
        if entry.lengthen_to is not None:
            if entry.filler is None:
                raise InputError(f"mix entry '{entry.source}': lengthen_to needs a filler source")
            filler = [p.premise for p in _load_source(entry.filler, data_root, relative_to)]
            # Seeded by the entry's place in the mix: the same mix file gives the same premises.
            rows = lengthen_premises(rows, filler, entry.lengthen_to, seed=cfg.seed + n)
        pairs.extend(rows * max(1, entry.repeat))
    return pairs


def _load_source(source: str, data_root: Path, relative_to: Path) -> list[NLIPair]:
    if source in {s.name for s in NLI_SETS}:
        path = shared_set_path(source, data_root)
    else:
        path = Path(source)
        path = path if path.is_absolute() else relative_to / path
    if not path.is_file():
        raise InputError(f"mix entry '{source}': no such file {path}")
    return load_nli(path)


def is_held_out(pair: NLIPair, fraction: float) -> bool:
    digest = hashlib.sha256(f"{pair.premise}\x1f{pair.hypothesis}".encode()).digest()
    return int.from_bytes(digest[:4], "big") / 2**32 < fraction


def split_holdout(pairs: list[NLIPair], fraction: float) -> tuple[list[NLIPair], list[NLIPair]]:
    """(train, held out); a repeated pair lands wholly on one side. Held-out pairs are unique."""
    train, held, seen = [], [], set()
    for p in pairs:
        if not is_held_out(p, fraction):
            train.append(p)
        elif (p.premise, p.hypothesis) not in seen:
            seen.add((p.premise, p.hypothesis))
            held.append(p)
    return train, held


def base_path(spec: str, allow_hub: bool, scratch: Path) -> str:
    """The base to fine-tune: an encoder, or ragmend's shipped judge continued from its own
    weights (dequantized into `scratch`, since the repository holds only its int8 export)."""
    if spec == bundled.BUNDLED_PREFIX + bundled.RAGMEND_NLI.name:
        if not (scratch / "config.json").is_file():
            float_model_from_onnx(bundled.RAGMEND_NLI.path(), scratch)
        return str(scratch)
    if spec.startswith(bundled.BUNDLED_PREFIX):
        return str(bundled.resolve_bundled(spec, "embeddings").path())
    return bundled.resolve_local_or_hub(spec, "nli base", allow_hub)


def train_nli(
    cfg: TrainConfig,
    pairs: list[NLIPair],
    out_dir: Path,
    allow_hub: bool = False,
    progress: Progress | None = None,
    max_steps: int | None = None,
    device: str = "cpu",
) -> dict[str, Any]:
    """Train and save to out_dir/model. `max_steps` stops early (a checkpoint is kept to resume).

    `cfg.holdout` of the pairs are set aside in out_dir/heldout.jsonl for calibration. `device`
    ('cpu', 'cuda', 'cuda:1') is not part of the configuration: a run may resume on another.
    """
    import torch
    from transformers import (
        AutoModelForSequenceClassification,
        AutoTokenizer,
        get_linear_schedule_with_warmup,
    )

    from ragmend.models.runtime import quiet_transformers

    quiet_transformers()
    out_dir.mkdir(parents=True, exist_ok=True)
    ckpt_path = out_dir / "checkpoint.pt"
    pairs, held = split_holdout(pairs, cfg.holdout)
    write_pairs(out_dir / "heldout.jsonl", held)
    base = base_path(cfg.base, allow_hub, out_dir / "base")
    labels = {i: lab for i, lab in enumerate(NLI_LABELS)}
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForSequenceClassification.from_pretrained(
        base,
        num_labels=3,
        id2label=labels,
        label2id={v: k for k, v in labels.items()},
        ignore_mismatched_sizes=True,
    ).to(device)
    order = list(range(len(pairs)))
    steps_per_epoch = (len(pairs) + cfg.batch_size - 1) // cfg.batch_size
    total = steps_per_epoch * cfg.epochs
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.learning_rate)
    scheduler = get_linear_schedule_with_warmup(optimizer, int(cfg.warmup_ratio * total), total)
    stamp = {"fingerprint": cfg.fingerprint(), "n_pairs": len(pairs)}
    step = checkpoint.resume(ckpt_path, stamp, model, optimizer, scheduler, device)
    torch.manual_seed(cfg.seed)
    model.train()
    targets = soft_targets(pairs, cfg.soft_weight)
    t0, losses = time.perf_counter(), []
    while step < total and (max_steps is None or step < max_steps):
        epoch, offset = divmod(step, steps_per_epoch)
        random.Random(cfg.seed + epoch).shuffle(order)  # the same order on resume
        idx = order[offset * cfg.batch_size : (offset + 1) * cfg.batch_size]
        batch = [pairs[i] for i in idx]
        enc = tokenizer(
            [p.premise for p in batch],
            [p.hypothesis for p in batch],
            truncation="only_first",
            max_length=cfg.max_length,
            padding=True,
            return_tensors="pt",
        ).to(device)
        target = torch.from_numpy(targets[idx]).to(device)
        with torch.autocast(torch.device(device).type, dtype=torch.bfloat16, enabled=cfg.bf16):
            logits = model(**enc).logits
        # Cross-entropy against a distribution: the usual loss for one-hot rows, distillation
        # (KL to the teacher up to its constant entropy) for soft ones.
        loss = -(target * torch.log_softmax(logits.float(), dim=-1)).sum(dim=-1).mean()
        checkpoint.optimizer_step(loss, model, optimizer, scheduler)
        step += 1
        losses.append(loss.item())
        if progress:
            progress(step, total, losses[-1])
        if step % cfg.checkpoint_every == 0 or step == max_steps:
            checkpoint.save(ckpt_path, stamp, step, model, optimizer, scheduler)
    seconds = time.perf_counter() - t0
    if step < total:
        return {"finished": False, "step": step, "total_steps": total, "checkpoint": str(ckpt_path)}
    model.eval()
    final = out_dir / "model"
    model.save_pretrained(final)
    tokenizer.save_pretrained(final)
    (final / "train_config.json").write_text(json.dumps(asdict(cfg), indent=2, default=str))
    ckpt_path.unlink(missing_ok=True)
    trained = len(losses) * cfg.batch_size
    return {
        "finished": True,
        "step": step,
        "total_steps": total,
        "model": str(final),
        "pairs": len(pairs),
        "held_out": len(held),
        "seconds": round(seconds, 1),
        "pairs_per_s": round(trained / seconds, 1) if seconds else 0.0,
        "first_loss": round(losses[0], 4) if losses else None,
        "final_loss_mean_last_50": round(sum(losses[-50:]) / max(1, len(losses[-50:])), 4),
    }


def soft_targets(pairs: list[NLIPair], soft_weight: float) -> np.ndarray:
    """(n, 3) float32 training targets in NLI_LABELS order (see TrainConfig.soft_weight)."""
    if not 0.0 <= soft_weight <= 1.0:
        raise InputError(f"soft_weight must be in [0, 1], got {soft_weight}")
    out = np.zeros((len(pairs), len(NLI_LABELS)), dtype=np.float32)
    for i, p in enumerate(pairs):
        out[i, NLI_LABELS.index(p.label)] = 1.0
        if p.probs is not None:
            out[i] = (1.0 - soft_weight) * out[i] + soft_weight * np.asarray(p.probs, dtype=np.float32)
    return out


def write_pairs(path: Path, pairs: list[NLIPair]) -> None:
    atomic_write_text(path, "".join(json.dumps(p.as_json(), ensure_ascii=False) + "\n" for p in pairs))
