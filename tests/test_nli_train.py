"""`ragmend nli train`: the data-mix rules, training, and resuming from a checkpoint."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import numpy as np
import pytest

from ragmend.corpora.readers import NLIPair
from ragmend.errors import InputError
from ragmend.models.nli import TransformersNLI
from ragmend.train.nli_train import MixEntry, TrainConfig, load_train_config, resolve_mix, train_nli

PAIRS = [
    NLIPair(
        premise="A man plays a guitar on stage.", hypothesis="A man is playing music.", label="entailment"
    ),
    NLIPair(
        premise="A man plays a guitar on stage.",
        hypothesis="The man is asleep in bed.",
        label="contradiction",
    ),
    NLIPair(
        premise="A man plays a guitar on stage.", hypothesis="The man is a famous star.", label="neutral"
    ),
] * 8


def _probs(pair: NLIPair) -> tuple[float, float, float]:
    assert pair.probs is not None, "the pair has no soft label"
    return pair.probs


def _write(path: Path, pairs: list[NLIPair]) -> Path:
    path.write_text("".join(json.dumps(p.as_json()) + "\n" for p in pairs))
    return path


def test_mix_refuses_evaluation_only_sets_and_missing_files(tmp_path: Path) -> None:
    cfg = TrainConfig(mix=(MixEntry(source="anli_dev_r1"),))
    with pytest.raises(InputError, match="evaluation only"):
        resolve_mix(cfg, tmp_path, tmp_path)
    with pytest.raises(InputError, match="no such file"):
        resolve_mix(TrainConfig(mix=(MixEntry(source="missing.jsonl"),)), tmp_path, tmp_path)
    mix = tmp_path / "mix.yaml"
    mix.write_text("epochs: 1\n")
    with pytest.raises(InputError, match="lists no data"):
        load_train_config(mix)
    mix.write_text("mix: [{source: a.jsonl}]\nepocs: 2\n")
    with pytest.raises(InputError, match="epocs"):
        load_train_config(mix)


def test_dev_only_keeps_dev_split_claims(tmp_path: Path) -> None:
    from ragmend.corpora.readers import split_of

    claims = [f"Claim number {i} is about something." for i in range(40)]
    data = _write(
        tmp_path / "f.jsonl", [NLIPair(premise="evidence", hypothesis=c, label="entailment") for c in claims]
    )
    kept = resolve_mix(TrainConfig(mix=(MixEntry(source=str(data), dev_only=True),)), tmp_path, tmp_path)
    assert kept and len(kept) < 40 and all(split_of(p.hypothesis) == "dev" for p in kept)


def test_lengthen_keeps_premise_label_and_hypothesis_whole(tmp_path: Path) -> None:
    """A mix entry with `lengthen_to` sets each premise inside filler sentences (other
    sources' paragraphs) up to that length; the premise itself, its label and its hypothesis stay
    as they were, its place among the fillers varies, and the same mix gives the same pairs."""
    filler = [
        NLIPair(
            premise=f"Town {i}: Town {i} is a village in the district. It had {i} inhabitants in 2001. "
            "The church dates from the twelfth century.",
            hypothesis="x",
            label="neutral",
        )
        for i in range(30)
    ]
    _write(tmp_path / "filler.jsonl", filler)
    _write(tmp_path / "p.jsonl", PAIRS)
    entry = MixEntry(source="p.jsonl", lengthen_to=80, filler="filler.jsonl")
    cfg = TrainConfig(mix=(entry,))
    long = resolve_mix(cfg, tmp_path, tmp_path)
    assert long == resolve_mix(cfg, tmp_path, tmp_path)
    assert len(long) == len(PAIRS)
    for short, p in zip(PAIRS, long, strict=True):
        assert (p.label, p.hypothesis) == (short.label, short.hypothesis) and short.premise in p.premise
        assert len(p.premise.split()) <= 80 + 25 and p.id.endswith("-long")
    assert max(len(p.premise.split()) for p in long) > 60
    starts = {p.premise.startswith(PAIRS[0].premise) for p in long}
    assert starts == {True, False}  # the evidence is not always first
    with pytest.raises(InputError, match="filler"):
        resolve_mix(TrainConfig(mix=(MixEntry(source="p.jsonl", lengthen_to=80),)), tmp_path, tmp_path)


def _tiny(base: Path, **overrides: object) -> TrainConfig:
    """A config for the small random BERT: short sequences, small batches, one fake mix entry."""
    fields = {"base": str(base), "batch_size": 8, "max_length": 32, "mix": (MixEntry(source="p.jsonl"),)}
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


@pytest.mark.slow
def test_training_loss_falls(tmp_path: Path, random_nli_dir: Path) -> None:
    """The loop really optimises: on a small repeated set the loss drops well below its start."""
    cfg = _tiny(random_nli_dir, epochs=40, learning_rate=3e-3, warmup_ratio=0.0, bf16=False)
    done = train_nli(cfg, PAIRS, tmp_path / "fit")
    assert done["first_loss"] > 0.9  # about ln 3 for a fresh 3-way head
    assert done["final_loss_mean_last_50"] < 0.6 * done["first_loss"]


# -- distillation --------------------------------------------------------------------------------


def test_soft_labels_round_trip_and_bad_ones_name_their_line(tmp_path: Path) -> None:
    from ragmend.corpora.readers import load_nli

    pair = NLIPair(premise="p", hypothesis="h", label="neutral", id="1", probs=(0.2, 0.3, 0.5))
    path = _write(
        tmp_path / "soft.jsonl", [pair, NLIPair(premise="p", hypothesis="h", label="entailment", id="2")]
    )
    assert load_nli(path) == [pair, NLIPair(premise="p", hypothesis="h", label="entailment", id="2")]
    path.write_text('{"premise": "p", "hypothesis": "h", "label": "neutral", "probs": [0.5, 0.6, 0.1]}\n')
    with pytest.raises(ValueError, match=r"soft.jsonl:1: 'probs' must be three probabilities"):
        load_nli(path)


def test_soft_targets_mix_the_teacher_with_the_pairs_own_label() -> None:
    from ragmend.train.nli_train import soft_targets

    pairs = [
        NLIPair(premise="p", hypothesis="h", label="entailment"),
        NLIPair(premise="p", hypothesis="h", label="entailment", probs=(0.0, 0.2, 0.8)),
    ]
    t = soft_targets(pairs, 0.5)
    assert np.allclose(t, [[1.0, 0.0, 0.0], [0.5, 0.1, 0.4]])
    assert np.allclose(soft_targets(pairs, 1.0)[1], [0.0, 0.2, 0.8])
    with pytest.raises(InputError, match="soft_weight"):
        soft_targets(pairs, 1.5)


def test_a_student_learns_the_teachers_labels(tmp_path: Path, random_nli_dir: Path) -> None:
    """Distillation is real: every pair says entailment, the teacher says otherwise, and with
    soft_weight 1 the student ends up predicting what the teacher said, pair by pair."""
    teacher = {
        "entailment": (0.05, 0.05, 0.9),
        "contradiction": (0.05, 0.9, 0.05),
        "neutral": (0.9, 0.05, 0.05),
    }
    pairs = [
        NLIPair(premise=p.premise, hypothesis=p.hypothesis, label="entailment", probs=teacher[p.label])
        for p in PAIRS
    ]
    cfg = _tiny(random_nli_dir, epochs=20, learning_rate=1e-2, warmup_ratio=0.0, bf16=False, soft_weight=1.0)
    done = train_nli(cfg, pairs, tmp_path / "student", device="cpu")
    probs = TransformersNLI(done["model"]).predict([(p.premise, p.hypothesis) for p in PAIRS[:3]]).probs
    assert [int(np.argmax(row)) for row in probs] == [2, 1, 0]
    assert probs.max(axis=1).min() > 0.7


def test_nli_label_writes_the_teachers_probabilities(tmp_path: Path, random_nli_dir: Path) -> None:
    from typer.testing import CliRunner

    from ragmend.cli.main import app
    from ragmend.corpora.readers import load_nli

    data = _write(tmp_path / "pairs.jsonl", PAIRS[:3])
    out = str(tmp_path / "soft")
    args = ["nli", "label", "--teacher", str(random_nli_dir), "--data", str(data), "--out", out]
    result = CliRunner().invoke(app, [*args, "--device", "cpu"])
    assert result.exit_code == 0, result.output
    labelled = load_nli(tmp_path / "soft" / "pairs.jsonl")
    teacher = TransformersNLI(str(random_nli_dir))
    expected = teacher.predict([(p.premise, p.hypothesis) for p in PAIRS[:3]]).probs
    assert [p.label for p in labelled] == [p.label for p in PAIRS[:3]]
    assert np.allclose([_probs(p) for p in labelled], expected, atol=1e-4)
    summary = json.loads(result.stdout[result.stdout.index("{") :])
    assert summary["files"]["pairs.jsonl"]["n"] == 3

    result = CliRunner().invoke(app, [*args[:5], str(tmp_path / "missing.jsonl"), *args[6:]])
    # The console wraps a long message where the temporary path happens to end it: read it unwrapped.
    assert result.exit_code == 2 and "neither a pair file nor a shared set" in " ".join(result.output.split())
    result = CliRunner().invoke(app, [*args[:5], "anli_dev_r1", *args[6:], "--data-root", str(tmp_path)])
    assert result.exit_code == 2 and "evaluation only" in " ".join(result.output.split())
    result = CliRunner().invoke(app, [*args, "--device", "tpu"])
    assert result.exit_code == 2 and "expected auto, cpu or cuda" in result.output


def test_nli_label_skips_the_rows_a_teacher_trained_on(tmp_path: Path, random_nli_dir: Path) -> None:
    from typer.testing import CliRunner

    from ragmend.cli.main import app
    from ragmend.corpora.readers import load_nli

    shared = tmp_path / "shared" / "nli" / "mnli"
    shared.mkdir(parents=True)
    _write(shared / "dev_mismatched.jsonl", PAIRS[:5])
    out = tmp_path / "soft"
    args = ["nli", "label", "--teacher", str(random_nli_dir), "--data", "mnli_dev_mismatched"]
    args += ["--out", str(out), "--data-root", str(tmp_path / "shared"), "--device", "cpu"]
    result = CliRunner().invoke(app, [*args, "--skip", "1", "--limit", "3"])
    assert result.exit_code == 0, result.output
    labelled = load_nli(out / "mnli_dev_mismatched.jsonl")
    assert [(p.premise, p.hypothesis) for p in labelled] == [(p.premise, p.hypothesis) for p in PAIRS[1:4]]
    assert all(p.probs is not None for p in labelled)
    result = CliRunner().invoke(app, [*args, "--skip", "1", "--limit", "3", "--bf16"])
    assert result.exit_code == 0, result.output
    in_bf16 = load_nli(out / "mnli_dev_mismatched.jsonl")
    assert np.allclose([_probs(p) for p in in_bf16], [_probs(p) for p in labelled], atol=0.02)
    result = CliRunner().invoke(app, [*args, "--skip", "-1"])
    assert result.exit_code == 2 and "--skip must be >= 0" in result.output
    # --skip-from reads the rows to skip from the teacher's mix (its limit for the set).
    teacher_mix = tmp_path / "teacher.yaml"
    teacher_mix.write_text("mix:\n  - {source: mnli_dev_mismatched, limit: 2}\n  - {source: snli_dev}\n")
    result = CliRunner().invoke(app, [*args, "--skip-from", str(teacher_mix)])
    assert result.exit_code == 0, result.output
    from_mix = load_nli(out / "mnli_dev_mismatched.jsonl")
    assert [p.hypothesis for p in from_mix] == [p.hypothesis for p in PAIRS[2:5]]
    result = CliRunner().invoke(app, [*args, "--skip-from", str(teacher_mix), "--skip", "1"])
    assert result.exit_code == 2 and "not both" in result.output
    teacher_mix.write_text("mix:\n  - {source: mnli_dev_mismatched}\n")
    result = CliRunner().invoke(app, [*args, "--skip-from", str(teacher_mix)])
    assert result.exit_code == 2 and "none is left to label" in result.output


@pytest.mark.parametrize("mix", sorted((Path(__file__).parents[1] / "train" / "mixes").glob("*.yaml")))
def test_shipped_mix_files_load(mix: Path) -> None:
    cfg = load_train_config(mix)
    assert cfg.mix and 0.0 <= cfg.soft_weight <= 1.0
    assert all(e.source for e in cfg.mix)


class _Planted:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, ("touch planted-ran",))


def test_a_planted_checkpoint_is_refused_not_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pickle

    from ragmend.errors import InputError
    from ragmend.train.checkpoint import resume

    monkeypatch.chdir(tmp_path)
    path = tmp_path / "checkpoint.pt"
    path.write_bytes(pickle.dumps({"step": 3, "payload": _Planted()}))
    with pytest.raises(InputError, match="not a checkpoint of tensors and plain values"):
        resume(path, {}, None, None, None, "cpu")
    assert not (tmp_path / "planted-ran").exists()
