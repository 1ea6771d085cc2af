"""Applies the environment third-party libraries read at import time, exactly once.

Called by every model loader before it imports transformers, sentence-transformers or litellm;
the values come from ragmend.settings.library_env so settings stays the only reader of env.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from ragmend.errors import InputError

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


def onnx_session_options(threads: int = 0) -> Any:
    """onnxruntime options for the request path's CPU graphs (NLI, cross-encoder). Worker threads
    do not spin after a run: a diagnosis runs the NLI graph, then the cross-encoder, then torch
    (the embeddings) back to back on the same cores, and threads left spinning by one steal them
    from the next (RAGTruth responses: p50 463 -> 418 ms on 2 cores, docs/diagnosis.md)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if threads:
        opts.intra_op_num_threads = threads
    return opts
