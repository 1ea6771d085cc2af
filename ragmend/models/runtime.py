"""Applies the environment third-party libraries read at import time, exactly once.

Called by every model loader before it imports transformers, sentence-transformers or litellm;
the values come from ragmend.settings.library_env so settings stays the only reader of env.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from ragmend.errors import InputError, ModelUnavailable

_lock = threading.Lock()


def quiet_transformers() -> None:
    """No "Loading weights" progress bars: they interleave with server logs and CLI output."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()


def prepare_libraries(allow_hub: bool) -> None:
    # Imported here, not at the top: the trainer uses this module's other helpers on machines
    # that hold torch and transformers but not the server's settings stack (a lent GPU).
    from ragmend.settings import library_env

    with _lock:
        env = library_env(allow_hub)
        for key, value in env.items():
            # setdefault: an operator's explicit environment wins.
            os.environ.setdefault(key, value)
        # NumPy may have loaded OpenBLAS before this ran; cap the pool it already started too.
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=int(os.environ["OPENBLAS_NUM_THREADS"]), user_api="blas")


def torch_device(spec: str) -> str:
    """'auto' is CUDA where torch sees a GPU, else CPU; 'cpu' and 'cuda[:n]' pass through.

    Only offline tools (training, teacher labelling) take a device: the server's models run on
    CPU (ONNX) unless configured otherwise.
    """
    import torch

    if spec not in ("auto", "cpu") and not spec.startswith("cuda"):
        raise InputError(f"device '{spec}': expected auto, cpu or cuda[:n]")
    if spec == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if spec.startswith("cuda") and not torch.cuda.is_available():
        raise InputError(f"device '{spec}' asked for, but torch sees no CUDA GPU (use --device cpu)")
    return spec


def export_onnx(
    model: Any,
    inputs: tuple[Any, ...],
    input_names: list[str],
    output: tuple[str, dict[int, str]],
    path: str,
) -> None:
    """A fixed-architecture encoder to an ONNX graph (TorchScript exporter, opset 17), batch and
    sequence axes dynamic, `output` (name, its dynamic axes); the one export both the NLI export
    and the embeddings runtime use."""
    import warnings

    import torch

    axes = {n: {0: "batch", 1: "sequence"} for n in input_names} | {output[0]: output[1]}
    with torch.inference_mode(), warnings.catch_warnings():
        # The TorchScript exporter warns about tracing details that do not apply to a
        # fixed-architecture encoder; each caller checks the graph against PyTorch instead.
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model,
            inputs,
            path,
            input_names=input_names,
            output_names=[output[0]],
            dynamic_axes=axes,
            opset_version=17,
            dynamo=False,
        )


def onnx_session_options(threads: int = 0) -> Any:
    """onnxruntime options for the request path's CPU graphs (NLI, cross-encoder). Worker threads
    do not spin after a run: a diagnosis runs the NLI graph, then the cross-encoder, then torch
    (the embeddings) back to back on the same cores, and threads left spinning by one steal them
    from the next (RAGTruth responses: p50 463 -> 418 ms on 2 cores, reports/history/diagnosis.md)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if threads:
        opts.intra_op_num_threads = threads
    return opts


class OnnxPairRunner:
    """An int8 ONNX cross-encoder (NLI, reranker) run on one pair per call, pairs spread over a
    pool of worker threads, each call on one intra-op thread.

    Why one pair per call: the bundled graphs are dynamically quantized, so every activation's
    int8 scale is taken over the whole input of a run. A batch made one pair's probabilities
    depend on its batch-mates (the bundled NLI model's P(entailment) moved by up to 0.36 between
    a pair scored alone and the same pair in a batch of a diagnosis; the reranker's sigmoid by up
    to 0.16, padding included). Alone, a pair always gets the same score. Why a pool: at these
    sizes two pairs at once on one thread each beat one pair on two threads, and nothing is
    spent on padding (docs/diagnosis.md, "One pair per run").
    """

    def __init__(self, onnx_path: str, what: str, workers: int = 0):
        import onnxruntime as ort

        try:
            self._session = ort.InferenceSession(
                onnx_path, onnx_session_options(1), providers=["CPUExecutionProvider"]
            )
        except Exception as e:  # onnxruntime raises its own untyped errors on a corrupt graph
            raise ModelUnavailable(f"{what} model {onnx_path} could not be loaded: {e}") from e
        self.inputs = frozenset(i.name for i in self._session.get_inputs())
        self.workers = workers or max(1, len(os.sched_getaffinity(0)))
        # Owned by this runner (no module-level pool): two models never share or starve a queue.
        self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix=f"ragmend-{what}")

    def _one(self, feeds: dict[str, np.ndarray]) -> np.ndarray:
        live = {k: v for k, v in feeds.items() if k in self.inputs}
        return np.asarray(self._session.run(None, live)[0]).reshape(-1)

    def logits(self, pairs: list[tuple[list[int], list[int]]]) -> np.ndarray:
        """One row of logits per (token ids, token type ids) pair, in order."""
        feeds = [
            {
                "input_ids": np.array([ids], dtype=np.int64),
                "attention_mask": np.ones((1, len(ids)), dtype=np.int64),
                "token_type_ids": np.array([types], dtype=np.int64),
            }
            for ids, types in pairs
        ]
        if not feeds:
            return np.zeros((0, 0), dtype=np.float32)
        if len(feeds) == 1 or self.workers == 1:
            return np.vstack([self._one(f) for f in feeds])
        return np.vstack(list(self._pool.map(self._one, feeds)))
