"""A trained transformers encoder with its head to an ONNX directory for a CPU role (the NLI
model, the hallucination detector): torch.onnx export (dynamic batch and sequence axes) ->
onnxruntime's transformer graph optimiser (fused attention, skip-layer-norm, GELU) -> dynamic
int8 quantisation of the weights. Built aside and renamed into place, after a check against
PyTorch that the caller defines.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ragmend.errors import ModelUnavailable

# Files of an existing output directory that survive a re-export (not calibration.json: a
# temperature belongs to the weights it was fitted on).
KEEP = ("MODEL_CARD.md", "DATA_CARD.md")


def export_encoder(
    model: Any,
    tokenizer: Any,
    out_dir: Path,
    output_axes: dict[int, str],
    check: Callable[[Path], dict[str, float]],
    good: Callable[[dict[str, float]], bool],
    int8: bool = True,
    optimize: bool = True,
) -> dict[str, Any]:
    """A transformers encoder with a head (its output `logits`, `output_axes` dynamic) to an
    ONNX directory: model.onnx (fused, int8 weights), tokenizer.json, config.json. Built aside;
    `check(work)` compares it with PyTorch and it replaces `out_dir` only when `good` says so."""
    from ragmend.models.runtime import export_onnx

    out_dir.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}-"))
    work.chmod(0o755)  # mkdtemp's 0700 would make a shipped model unreadable to other users
    try:
        fp32 = work / "fp32.onnx"
        enc = tokenizer(["a premise"], ["a hypothesis"], return_tensors="pt")
        names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in enc]
        export_onnx(model, tuple(enc[n] for n in names), names, ("logits", output_axes), str(fp32))
        graph = fp32
        if optimize:
            graph = _optimize(fp32, work / "opt.onnx", model.config)
        final = work / "model.onnx"
        if int8:
            from onnx import TensorProto
            from onnxruntime.quantization import QuantType, quantize_dynamic

            quantize_dynamic(
                str(graph),
                str(final),
                weight_type=QuantType.QInt8,
                per_channel=True,
                # The fused graph's contrib ops defeat shape inference; their outputs are float.
                extra_options={"DefaultTensorType": TensorProto.FLOAT},
            )
        else:
            shutil.copyfile(graph, final)
        for p in (work / "fp32.onnx", work / "opt.onnx"):
            p.unlink(missing_ok=True)
        tokenizer.backend_tokenizer.save(str(work / "tokenizer.json"))
        model.config.to_json_file(str(work / "config.json"))
        figures = check(work)
        if not good(figures):
            raise ModelUnavailable(f"exported graph disagrees with the PyTorch model: {figures}")
        if out_dir.exists():
            for name in KEEP:  # documentation of the model travels with it; weights do not
                if (out_dir / name).exists():
                    shutil.copy2(out_dir / name, work / name)
            shutil.rmtree(out_dir)
        work.rename(out_dir)
    finally:
        if work.exists():
            shutil.rmtree(work)
    return {
        "out": str(out_dir),
        "int8": int8,
        "optimized": optimize,
        "bytes": (out_dir / "model.onnx").stat().st_size,
        **figures,
    }


def _optimize(src: Path, dst: Path, config: Any) -> Path:
    """Fuse attention and layer norms for BERT-family encoders; other graphs pass through."""
    if config.model_type not in ("bert", "roberta", "xlm-roberta", "mpnet", "distilbert"):
        return src
    from onnxruntime.transformers.optimizer import optimize_model

    kind = "bert" if config.model_type in ("roberta", "xlm-roberta", "mpnet") else config.model_type
    opt = optimize_model(
        str(src),
        model_type=kind,
        num_heads=config.num_attention_heads,
        hidden_size=config.hidden_size,
        opt_level=1,  # portable fusions only; level 2+ bakes in provider-specific kernels
    )
    opt.save_model_to_file(str(dst))
    return dst
