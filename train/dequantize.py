"""A float BERT classifier back from an int8 ONNX export of one (`ragmend nli export`).

The repository ships the judge as int8 ONNX only, so training that continues the shipped model
starts from its weights dequantized: each int8 weight times its scale, less its zero point.
The quantization noise this leaves is far below what a fine-tuning step moves, and the
parity check below bounds it on the export's own held-out pairs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ragmend.errors import InputError

BERT_SPECIAL_TOKENS: dict[str, Any] = {
    "model_input_names": ["input_ids", "token_type_ids", "attention_mask"],
    "cls_token": "[CLS]",
    "sep_token": "[SEP]",
    "pad_token": "[PAD]",
    "unk_token": "[UNK]",
    "mask_token": "[MASK]",
}
LINEAR_MODULES = frozenset({"query", "key", "value", "dense", "classifier"})


def _module(path: str, up: int = 1) -> str:
    """The PyTorch module an ONNX node or tensor path was exported from: '/bert/pooler/dense/Gemm_Add'
    -> 'bert.pooler.dense' (`up` path components dropped)."""
    return ".".join(path.strip("/").split("/")[:-up])


def _weight(tensors: dict[str, np.ndarray], name: str) -> np.ndarray:
    if name.endswith("_quantized"):
        base = name.removesuffix("_quantized")
        q = tensors[name].astype(np.float32)
        return (q - tensors[f"{base}_zero_point"].astype(np.float32)) * tensors[f"{base}_scale"]
    return tensors[name]


def _parameters(node: Any, is_const: Callable[[str], bool]) -> list[tuple[str, int]]:
    """(PyTorch parameter name, input index) for each weight `node` reads. Parameters are found by
    where the graph uses them, not by initializer name: the exporter shares one initializer
    between parameters that hold the same values."""
    op, ins = node.op_type, node.input
    if op in {"MatMul", "MatMulInteger"} and len(ins) > 1 and is_const(ins[1]):
        return [(f"{_module(node.name)}.weight", 1)]
    if op == "Gather" and is_const(ins[0]) and "embeddings" in node.name:
        return [(f"{_module(node.name)}.weight", 0)]
    if op == "Add" and _module(node.name).rsplit(".", 1)[-1] in LINEAR_MODULES:
        return [(f"{_module(node.name)}.bias", i) for i in (0, 1) if is_const(ins[i])]
    if op == "LayerNormalization":
        return [(f"{_module(node.name)}.weight", 1), (f"{_module(node.name)}.bias", 2)]
    if op == "SkipLayerNormalization":
        block = _module(node.output[0], up=2)
        return [(f"{block}.LayerNorm.weight", 2), (f"{block}.LayerNorm.bias", 3), (f"{block}.dense.bias", 4)]
    if op == "BiasGelu":
        return [(f"{_module(node.output[0], up=2)}.dense.bias", 1)]
    return []


def float_state_dict(onnx_path: Path) -> dict[str, np.ndarray]:
    """Every weight of a BertForSequenceClassification export (int8 or not), in PyTorch names and
    shapes."""
    import onnx
    from onnx import numpy_helper

    graph = onnx.load(str(onnx_path)).graph
    tensors = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    state: dict[str, np.ndarray] = {}
    for node in graph.node:
        for name, index in _parameters(node, tensors.__contains__):
            value = _weight(tensors, node.input[index])
            # MatMul holds a weight as (in, out); a torch Linear as (out, in).
            transposed = name.endswith(".weight") and node.op_type.startswith("MatMul")
            state[name] = value.T.copy() if transposed else value
    return state


def float_model_from_onnx(asset_dir: Path, out_dir: Path) -> Path:
    """Write a Hugging Face model directory of `asset_dir`'s export into out_dir; return it."""
    import torch
    from transformers import AutoConfig, AutoModelForSequenceClassification, PreTrainedTokenizerFast

    onnx_path = asset_dir / "model.onnx"
    if not onnx_path.is_file() or not (asset_dir / "config.json").is_file():
        raise InputError(f"{asset_dir} holds no ONNX export with its config.json")
    config = AutoConfig.from_pretrained(asset_dir)
    model = AutoModelForSequenceClassification.from_config(config)
    state = {k: torch.from_numpy(np.array(v, dtype=v.dtype)) for k, v in float_state_dict(onnx_path).items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if not k.endswith("position_ids")]
    if missing or unexpected:
        raise InputError(
            f"{onnx_path} does not map onto {config.model_type}: "
            f"missing {missing[:5]}, unexpected {unexpected[:5]}"
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tokenizer_file = str(asset_dir / "tokenizer.json")
    PreTrainedTokenizerFast(tokenizer_file=tokenizer_file, **BERT_SPECIAL_TOKENS).save_pretrained(out_dir)
    return out_dir
