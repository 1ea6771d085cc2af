"""What the trainers (NLI, detector) share: one optimiser step, and a resumable checkpoint
written atomically and refused when it belongs to another configuration or data."""

from __future__ import annotations

import os
import pickle
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ragmend.errors import InputError


def optimizer_step(loss: Any, model: Any, optimizer: Any, scheduler: Any) -> None:
    """Backpropagate `loss`, clip the gradient norm to 1 and advance the optimiser and schedule."""
    import torch

    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad()


def resume(
    path: Path, stamp: Mapping[str, Any], model: Any, optimizer: Any, scheduler: Any, device: str
) -> int:
    """The step to continue from: 0 without a checkpoint; else its states loaded, after checking
    that it carries the same `stamp` (the configuration's fingerprint, the data's size)."""
    import torch

    if not path.exists():
        return 0
    try:
        # weights_only: a checkpoint is data, never code to run (a planted file could be).
        state = torch.load(path, weights_only=True, map_location=device)
    except pickle.UnpicklingError as e:
        raise InputError(f"{path} is not a checkpoint of tensors and plain values; refused: {e}") from None
    if any(state.get(k) != v for k, v in stamp.items()):
        raise InputError(f"{path} belongs to another configuration or data; remove it to start over")
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    return int(state["step"])


def save(path: Path, stamp: Mapping[str, Any], step: int, model: Any, optimizer: Any, scheduler: Any) -> None:
    import torch

    tmp = path.with_suffix(".tmp")
    torch.save(
        {
            **stamp,
            "step": step,
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
        },
        tmp,
    )
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)  # a kill mid-save leaves the previous checkpoint
