"""`ragmend nli ...`: ragmend's own NLI model, its training data and its training."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from ragmend.cli.common import SHARED_DATA, err, progress_bar, run, settings, training_progress
from ragmend.errors import InputError
from ragmend.settings import Settings

DEVICE_HELP = "auto (CUDA where torch sees a GPU), cpu or cuda[:n]."

nli_app = typer.Typer(
    help="ragmend's own NLI model: training data and training.\n\nExample: ragmend nli pairs --out data/nli",
    no_args_is_help=True,
)


@nli_app.command("pairs")
def nli_pairs(
    out_dir: Annotated[Path, typer.Option("--out", help="Directory for one JSONL file per source.")],
    data_root: Annotated[Path, typer.Option(help="The shared data directory.")] = SHARED_DATA,
    limit: Annotated[
        int | None, typer.Option(help="Items per dataset (default all of the dev split).")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed for swaps and neutral sampling.")] = 0,
    grounded: Annotated[
        bool,
        typer.Option(
            help="Also the grounded pairs: response sentences and claims against source windows, "
            "labelled from the hallucination sets and edits, into <out>/grounded/ with a data card "
            "(--limit: rows per set)."
        ),
    ] = False,
) -> None:
    """Build in-domain NLI pairs from the DEV splits of HotpotQA and FEVER (entity swaps with spaCy).

    Example: ragmend nli pairs --out /tmp/nli-pairs --limit 100
    Example: ragmend nli pairs --out /tmp/nli-pairs --limit 50 --grounded
    """
    from ragmend.corpora.nli_pairs import build_in_domain_pairs
    from ragmend.corpora.readers import write_jsonl
    from ragmend.models.spacy_model import load_spacy

    def work() -> None:
        s = settings()
        if not (data_root / "hotpotqa").is_dir() or not (data_root / "fever").is_dir():
            raise InputError(f"{data_root} does not hold the shared data (hotpotqa/, fever/)")
        pairs = build_in_domain_pairs(data_root, load_spacy(s.models), seed=seed, limit=limit)
        summary = {}
        for source, rows in sorted(pairs.items()):
            write_jsonl((p.as_json() for p in rows), out_dir / f"{source}.jsonl")
            summary[source] = len(rows)
        if grounded:
            summary |= _grounded_pairs(data_root, out_dir / "grounded", s=s, seed=seed, limit=limit)
        print(json.dumps({"out": str(out_dir), "pairs": summary, "total": sum(summary.values())}, indent=2))

    run(work)


def _grounded_pairs(data_root: Path, out: Path, s: Settings, seed: int, limit: int | None) -> dict[str, int]:
    """The grounded pairs, one JSONL file per source set, and their data card; the count per file."""
    from ragmend.corpora.readers import write_jsonl
    from ragmend.fileio import atomic_write_json, atomic_write_text
    from ragmend.models.spacy_model import load_spacy
    from ragmend.train.grounded_pairs import build_grounded_pairs, card, card_markdown

    if not (data_root / "hallucination").is_dir():
        raise InputError(f"{data_root} does not hold the grounded-hallucination sets (hallucination/)")
    pairs = build_grounded_pairs(data_root, load_spacy(s.models), seed=seed, limit=limit)
    written = {}
    for name in sorted({p.set for p in pairs}):
        rows = (
            {**p.pair.as_json(), "set": p.set, "task": p.task, "group": p.group}
            for p in pairs
            if p.set == name
        )
        written[f"grounded/{name}"] = write_jsonl(rows, out / f"{name}.jsonl")
    summary = card(pairs)
    atomic_write_json(out / "card.json", summary)
    atomic_write_text(out / "DATA_CARD.md", card_markdown(summary))
    return written


@nli_app.command("train")
def nli_train(
    config: Annotated[Path, typer.Option("--mix", help="Training config with the data mix (YAML).")],
    out_dir: Annotated[Path, typer.Option("--out", help="Output directory (model/ and checkpoint.pt).")],
    data_root: Annotated[Path, typer.Option(help="The shared data directory.")] = SHARED_DATA,
    epochs: Annotated[int | None, typer.Option(help="Override the config's epochs.")] = None,
    max_length: Annotated[int | None, typer.Option(help="Override the config's max length.")] = None,
    seed: Annotated[int | None, typer.Option(help="Override the config's seed.")] = None,
    max_steps: Annotated[int | None, typer.Option(help="Stop after N steps (resume later).")] = None,
    device: Annotated[str, typer.Option(help=DEVICE_HELP)] = "auto",
) -> None:
    """Fine-tune an NLI cross-encoder on a data mix; rerun the same command to resume.

    Example: ragmend nli train --mix train/mixes/minilm-v0.yaml --out data/nli-minilm-v0
    """
    from ragmend.models.runtime import torch_device
    from ragmend.train.nli_train import load_train_config, resolve_mix, train_nli

    def work() -> None:
        s = settings()
        where = torch_device(device)
        cfg = load_train_config(config, epochs=epochs, max_length=max_length, seed=seed)
        pairs = resolve_mix(cfg, data_root, Path.cwd())
        err.print(f"{len(pairs)} pairs from {len(cfg.mix)} sources")
        with training_progress() as progress:
            result = train_nli(
                cfg,
                pairs,
                out_dir,
                allow_hub=s.models.allow_hub,
                max_steps=max_steps,
                device=where,
                progress=progress,
            )
        print(json.dumps(result, indent=2))

    run(work)


@nli_app.command("label")
def nli_label(
    teacher: Annotated[Path, typer.Option(help="The teacher NLI model directory (transformers or ONNX).")],
    data: Annotated[
        list[str],
        typer.Option(
            help="A pair file in the shared NLI format, or a permissive set name as in a mix "
            "(mnli_dev_mismatched, ...) (repeatable)."
        ),
    ],
    out_dir: Annotated[Path, typer.Option("--out", help="Directory for the labelled files (same names).")],
    data_root: Annotated[Path, typer.Option(help="The shared data directory.")] = SHARED_DATA,
    device: Annotated[str, typer.Option(help=DEVICE_HELP)] = "auto",
    max_length: Annotated[int, typer.Option(help="Token limit per pair (the premise is cut).")] = 256,
    batch_size: Annotated[int, typer.Option(help="Pairs per forward pass.")] = 64,
    skip: Annotated[
        int, typer.Option(help="Leave out the first N pairs of each file (those the teacher trained on).")
    ] = 0,
    skip_from: Annotated[
        Path | None,
        typer.Option(
            help="The teacher's training mix: leave out, per file, the rows it trained on (its limit "
            "for that set; instead of --skip)."
        ),
    ] = None,
    limit: Annotated[int | None, typer.Option(help="Label at most N pairs of each file.")] = None,
    bf16: Annotated[
        bool, typer.Option("--bf16/--fp32", help="Run a transformers teacher in bf16 (faster, ~same labels).")
    ] = False,
) -> None:
    """Write a teacher's probabilities onto pair files ('probs'), for training a student on them.

    Each pair keeps its own label; `nli train` mixes it with the teacher's (soft_weight). A set
    name writes `<name>.jsonl`; with --skip or --skip-from, the rows a teacher trained on stay out
    of its labels.
    Example: ragmend nli label --teacher data/nli-mpnet/model --data data/nli-pairs/fever_swap.jsonl
    --out data/nli-soft
    Example: ragmend nli label --teacher data/nli-mpnet-cpu/model --data snli_dev
    --skip-from train/mixes/mpnet-teacher-cpu.yaml --out data/nli-soft
    """
    from ragmend.corpora.readers import load_nli as load_pairs
    from ragmend.models.nli import open_nli
    from ragmend.models.runtime import torch_device
    from ragmend.train.nli_distill import agreement, label_pairs
    from ragmend.train.nli_train import load_train_config, shared_set_path, trained_rows, write_pairs

    def work() -> None:
        settings()
        where = torch_device(device)
        if not teacher.is_dir():
            raise InputError(f"not a model directory: {teacher}")
        if skip < 0 or (limit is not None and limit < 1):
            raise InputError("--skip must be >= 0 and --limit >= 1")
        if skip and skip_from is not None:
            raise InputError("give --skip or --skip-from, not both")
        teacher_mix = load_train_config(skip_from) if skip_from is not None else None
        sources = {}
        for spec in data:
            path, name = Path(spec), Path(spec).name
            if not path.is_file():
                path, name = shared_set_path(spec, data_root), f"{spec}.jsonl"
            seen = skip if teacher_mix is None else trained_rows(teacher_mix, spec)
            if seen is None:
                raise InputError(f"{skip_from} trains on every row of {spec}: none is left to label")
            try:
                rows = load_pairs(path, limit=None if limit is None else seen + limit)
            except ValueError as e:
                raise InputError(str(e)) from e
            sources[name] = rows[seen:]
        nli = open_nli(str(teacher), max_length, batch_size, device=where, bf16=bf16)
        summary = {}
        with progress_bar() as bar:

            def label(name: str, pairs: list) -> list:
                job = bar.add_task(name, total=len(pairs))
                return label_pairs(nli, pairs, progress=lambda done, _: bar.update(job, completed=done))

            for name, pairs in sources.items():
                labelled = label(name, pairs)
                write_pairs(out_dir / name, labelled)
                summary[name] = agreement(labelled)
        result = {"teacher": str(teacher), "device": where, "bf16": bf16, "out": str(out_dir)}
        print(json.dumps({**result, "files": summary}, indent=2))

    run(work)


@nli_app.command("export")
def nli_export(
    model_dir: Annotated[Path, typer.Option("--model", help="A trained model directory (transformers).")],
    out_dir: Annotated[Path, typer.Option("--out", help="Directory for model.onnx, tokenizer, config.")],
    int8: Annotated[bool, typer.Option("--int8/--fp32", help="Quantise the weights to int8.")] = True,
    optimize: Annotated[
        bool, typer.Option("--optimize/--no-optimize", help="Fuse attention and layer norms.")
    ] = True,
) -> None:
    """Export a trained cross-encoder to ONNX for the NLI role (int8 by default), checked against it.

    Example: ragmend nli export --model data/nli-minilm-v0/model --out data/nli-minilm-v0/onnx-int8
    """
    from ragmend.train.nli_export import export_nli

    def work() -> None:
        settings()
        print(json.dumps(export_nli(model_dir, out_dir, int8=int8, optimize=optimize), indent=2))

    run(work)


@nli_app.command("calibrate")
def nli_calibrate(
    model_dir: Annotated[Path, typer.Option("--model", help="The NLI model directory to calibrate.")],
    data: Annotated[Path, typer.Option(help="Held-out pairs (heldout.jsonl of `nli train`).")],
    limit: Annotated[int | None, typer.Option(help="Use only the first N pairs.")] = None,
) -> None:
    """Fit a softmax temperature on held-out pairs and store it as calibration.json beside the model.

    Example: ragmend nli calibrate --model data/nli-v0/onnx --data data/nli-v0/heldout.jsonl
    """
    from ragmend.corpora.readers import load_nli as load_pairs
    from ragmend.models.nli import open_nli
    from ragmend.train.calibrate import calibrate, save_calibration

    def work() -> None:
        s = settings()
        if not data.is_file():
            raise InputError(f"calibration data not found: {data}")
        if not model_dir.is_dir():
            raise InputError(f"not a model directory: {model_dir}")
        try:
            pairs = load_pairs(data, limit=limit)
        except ValueError as e:
            raise InputError(str(e)) from e
        if not pairs:
            raise InputError(f"{data} holds no pairs")
        nli = open_nli(str(model_dir), s.models.nli.max_length, s.models.nli.batch_size)
        record = calibrate(nli, pairs, source=str(data))
        save_calibration(model_dir, record)
        print(json.dumps(record, indent=2))

    run(work)
