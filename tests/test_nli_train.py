"""`ragmend nli train`: the data-mix rules, training, and resuming from a checkpoint."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from bench.datasets import NLIPair
from ragmend.errors import InputError
from ragmend.models.nli import TransformersNLI
from train.nli_train import MixEntry, TrainConfig, load_train_config, resolve_mix, train_nli

PAIRS = [
    NLIPair("A man plays a guitar on stage.", "A man is playing music.", "entailment"),
    NLIPair("A man plays a guitar on stage.", "The man is asleep in bed.", "contradiction"),
    NLIPair("A man plays a guitar on stage.", "The man is a famous star.", "neutral"),
] * 8


def _write(path: Path, pairs: list[NLIPair]) -> Path:
    path.write_text("".join(json.dumps(p.as_json()) + "\n" for p in pairs))
    return path


def test_mix_refuses_evaluation_only_sets_and_missing_files(tmp_path: Path) -> None:
    cfg = TrainConfig(mix=(MixEntry("anli_dev_r1"),))
    with pytest.raises(InputError, match="evaluation only"):
        resolve_mix(cfg, tmp_path, tmp_path)
    with pytest.raises(InputError, match="no such file"):
        resolve_mix(TrainConfig(mix=(MixEntry("missing.jsonl"),)), tmp_path, tmp_path)
    mix = tmp_path / "mix.yaml"
    mix.write_text("epochs: 1\n")
    with pytest.raises(InputError, match="lists no data"):
        load_train_config(mix)
    mix.write_text("mix: [{source: a.jsonl}]\nepocs: 2\n")
    with pytest.raises(InputError, match="epocs"):
        load_train_config(mix)


def test_dev_only_keeps_dev_split_claims(tmp_path: Path) -> None:
    from bench.datasets import split_of

    claims = [f"Claim number {i} is about something." for i in range(40)]
    data = _write(tmp_path / "f.jsonl", [NLIPair("evidence", c, "entailment") for c in claims])
    kept = resolve_mix(TrainConfig(mix=(MixEntry(str(data), dev_only=True),)), tmp_path, tmp_path)
    assert kept and len(kept) < 40 and all(split_of(p.hypothesis) == "dev" for p in kept)


def _tiny(base: Path, **overrides: object) -> TrainConfig:
    """A config for the small random BERT: short sequences, small batches, one fake mix entry."""
    fields = {"base": str(base), "batch_size": 8, "max_length": 32, "mix": (MixEntry("p.jsonl"),)}
    return TrainConfig(**(fields | overrides))  # type: ignore[arg-type]


def test_train_stop_resume_and_load(tmp_path: Path, random_nli_dir: Path) -> None:
    cfg = _tiny(random_nli_dir, epochs=2, learning_rate=1e-3, checkpoint_every=100)
    first = train_nli(cfg, PAIRS, tmp_path / "run", max_steps=2)
    assert first == {
        "finished": False,
        "step": 2,
        "total_steps": 6,
        "checkpoint": str(tmp_path / "run" / "checkpoint.pt"),
    }
    done = train_nli(cfg, PAIRS, tmp_path / "run")  # resumes at step 2
    assert done["finished"] and done["step"] == 6 and not (tmp_path / "run" / "checkpoint.pt").exists()
    nli = TransformersNLI(done["model"])
    probs = nli.predict([(p.premise, p.hypothesis) for p in PAIRS[:3]]).probs
    assert probs.shape == (3, 3) and np.allclose(probs.sum(axis=1), 1.0, atol=1e-5)
    assert nli.model.config.id2label == {0: "entailment", 1: "neutral", 2: "contradiction"}

    # A checkpoint of another configuration is refused, not silently mixed in.
    train_nli(cfg, PAIRS, tmp_path / "other", max_steps=1)
    with pytest.raises(InputError, match="another configuration"):
        train_nli(dataclasses.replace(cfg, seed=1), PAIRS, tmp_path / "other")


def test_training_loss_falls(tmp_path: Path, random_nli_dir: Path) -> None:
    """The loop really optimises: on a small repeated set the loss drops well below its start."""
    cfg = _tiny(random_nli_dir, epochs=40, learning_rate=3e-3, warmup_ratio=0.0, bf16=False)
    done = train_nli(cfg, PAIRS, tmp_path / "fit")
    assert done["first_loss"] > 0.9  # about ln 3 for a fresh 3-way head
    assert done["final_loss_mean_last_50"] < 0.6 * done["first_loss"]
