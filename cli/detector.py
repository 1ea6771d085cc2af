"""`ragmend detector ...`: the hallucination detector's training data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from ragmend.cli.common import SHARED_DATA, run, settings

detector_app = typer.Typer(
    help="The hallucination detector: its training data.\n\nExample: ragmend detector data --out data/det",
    no_args_is_help=True,
)


@detector_app.command("data")
def detector_data(
    out_dir: Annotated[Path, typer.Option("--out", help="Directory for train.jsonl, dev.jsonl, stats.json.")],
    data_root: Annotated[Path, typer.Option(help="The shared data directory.")] = SHARED_DATA,
    per_task: Annotated[
        int, typer.Option(min=2, help="Rows at most per task shape, half of each label.")
    ] = 4000,
    limit: Annotated[
        int | None, typer.Option(min=1, help="HotpotQA and FEVER DEV items read (default all).")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed for the edits, the draws and the order.")] = 0,
) -> None:
    """Build the detector's training data: the shared grounded-hallucination sets and ragmend's
    controlled edits, DEV splits only, balanced by task shape, label and length
    (ragmend/assets/detector/DATA_CARD.md says what is in it).

    Example: ragmend detector data --out /tmp/detector --limit 200 --per-task 400
    """
    from ragmend.errors import InputError
    from ragmend.models.spacy_model import load_spacy
    from ragmend.train.detector_data import build, write

    def work() -> None:
        s = settings()
        for needed in ("hallucination", "hotpotqa", "fever"):
            if not (data_root / needed).is_dir():
                raise InputError(f"{data_root} does not hold the shared data ({needed}/ is missing)")
        data = build(data_root, load_spacy(s.models), seed=seed, per_task=per_task, limit=limit)
        print(json.dumps({"out": str(out_dir), **write(data, out_dir)}, indent=2))

    run(work)


DEVICE_HELP = "auto (CUDA where torch sees a GPU), cpu or cuda[:n]."


@detector_app.command("train")
def detector_train(
    data_dir: Annotated[Path, typer.Option("--data", help="What `ragmend detector data` wrote.")],
    out_dir: Annotated[Path, typer.Option("--out", help="Output directory (model/ and checkpoint.pt).")],
    epochs: Annotated[int, typer.Option(min=1, help="Passes over the training rows.")] = 2,
    max_length: Annotated[int, typer.Option(min=64, max=512, help="Tokens a model input holds.")] = 384,
    limit: Annotated[int | None, typer.Option(min=1, help="Training rows (default all).")] = None,
    max_steps: Annotated[int | None, typer.Option(min=1, help="Stop after this many steps.")] = None,
    device: Annotated[str, typer.Option(help=DEVICE_HELP)] = "auto",
    oversample: Annotated[
        list[str] | None,
        typer.Option(help="SET=N: each row of a set (its id's head, as ragtruth) read N times an epoch."),
    ] = None,
) -> None:
    """Train the token-level detector on train.jsonl (resumable: rerun after a stop).

    Example: ragmend detector train --data data/detector --out data/detector-model --oversample ragtruth=4
    """
    from ragmend.cli.common import err, training_progress
    from ragmend.errors import InputError
    from ragmend.models.runtime import torch_device
    from ragmend.train.detector_train import DetectorTrainConfig, read_rows, train_detector
    from ragmend.train.detector_train import oversample as repeat

    def times() -> dict[str, int]:
        out = {}
        for item in oversample or ():
            name, _, n = item.partition("=")
            if not name or not n.isdigit() or int(n) < 1:
                raise InputError(f"--oversample {item!r}: expected SET=N with N >= 1 (as ragtruth=4)")
            out[name] = int(n)
        return out

    def work() -> None:
        rows = repeat(read_rows(data_dir / "train.jsonl")[:limit], times())
        err.print(f"{len(rows)} training rows")
        cfg = DetectorTrainConfig(epochs=epochs, max_length=max_length)
        with training_progress() as progress:
            result = train_detector(
                cfg,
                rows,
                out_dir,
                device=torch_device(device),
                max_steps=max_steps,
                progress=progress,
            )
        print(json.dumps(result, indent=2))

    run(work)


@detector_app.command("export")
def detector_export(
    model_dir: Annotated[Path, typer.Option("--model", help="A trained detector (transformers directory).")],
    out_dir: Annotated[Path, typer.Option("--out", help="The ONNX directory to write (replaced whole).")],
    int8: Annotated[bool, typer.Option(help="Quantise the weights to int8.")] = True,
) -> None:
    """Export the trained detector to ONNX (int8 weights), checked against PyTorch.

    Example: ragmend detector export --model data/detector-model/model --out ragmend/assets/detector
    """
    from ragmend.train.detector_export import export_detector

    run(lambda: print(json.dumps(export_detector(model_dir, out_dir, int8=int8), indent=2)))


@detector_app.command("eval")
def detector_eval(
    model_dir: Annotated[
        Path, typer.Option("--model", help="A trained detector: ONNX or transformers directory.")
    ],
    data_root: Annotated[Path, typer.Option(help="The shared data directory.")] = SHARED_DATA,
    threshold: Annotated[
        float | None, typer.Option(help="Operating point (default: the best F1 on RAGTruth's train sample).")
    ] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="RAGTruth TEST responses (default all).")] = None,
) -> None:
    """RAGTruth: the threshold chosen on the train sample, then TEST at it, per task
    (response-level and character-level span F1, AUROC, seconds per response).

    Example: ragmend detector eval --model data/detector-model/model --limit 200
    """
    from ragmend.bench.suites.detector import run_detector_eval
    from ragmend.cli.common import err

    def work() -> None:
        print(json.dumps(run_detector_eval(model_dir, data_root, threshold, limit, log=err.print), indent=2))

    run(work)
