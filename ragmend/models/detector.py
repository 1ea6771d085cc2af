"""The hallucination detector role: a token classifier over (question + a source window, the
response) that says which response tokens no source supports (LettuceDetect's form).

A response is read against every window of its sources, nothing cut: the question and the
sources are tokenised once and cut into windows of what fits beside the response (overlapping by
`WINDOW_OVERLAP` tokens); a response longer than `max_response_tokens` is read in parts, each
against every window. A token's P(unsupported) is the least any window gives it (supported
where some window supports it); the response's is its highest token's; its spans are the runs
of tokens at or over the threshold, as character offsets into the response.

The same windows serve training (train/detector_train.py: the one window that best covers the
response) and inference, so what the model learned on is what it reads.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ragmend.errors import ModelUnavailable

WINDOW_OVERLAP = 64
MAX_LENGTH = 512  # MiniLM's positions
MAX_RESPONSE_TOKENS = 192


@dataclass(frozen=True)
class Window:
    """One model input: the ids, segment ids, and for each position the response character range
    it covers (None outside the response)."""

    ids: list[int]
    type_ids: list[int]
    response_chars: list[tuple[int, int] | None]
    response_part: int  # which part of the response (0 when it fits whole)


@dataclass(frozen=True)
class Detection:
    p_unsupported: float  # the highest token's
    spans: tuple[tuple[int, int, float], ...]  # (start, end, highest P in it), character offsets
    windows: int  # model inputs read
    token_probs: tuple[tuple[int, int, float], ...]  # each response token: (start, end, P)


class Windows:
    """Cuts (question, sources, response) into model inputs (the module's rule)."""

    def __init__(
        self, tokenizer: Any, max_length: int = MAX_LENGTH, max_response_tokens: int = MAX_RESPONSE_TOKENS
    ):
        self._tokenizer = tokenizer  # a tokenizers.Tokenizer, truncation and padding off
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()
        self.cls = self._tokenizer.token_to_id("[CLS]")
        self.sep = self._tokenizer.token_to_id("[SEP]")
        self.pad = self._tokenizer.token_to_id("[PAD]") or 0
        self.max_length = max_length
        self.max_response_tokens = max_response_tokens
        self._lock = threading.Lock()

    def encode(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        with self._lock:
            enc = self._tokenizer.encode(text, add_special_tokens=False)
        return list(enc.ids), [(int(a), int(b)) for a, b in enc.offsets]

    def context_ids(self, question: str, sources: Sequence[str]) -> list[int]:
        text = "\n".join(s for s in [question.strip(), *(s.strip() for s in sources)] if s)
        return self.encode(text)[0]

    def response_parts(self, response: str) -> list[tuple[list[int], list[tuple[int, int]]]]:
        ids, offsets = self.encode(response)
        n = self.max_response_tokens
        return [(ids[i : i + n], offsets[i : i + n]) for i in range(0, max(1, len(ids)), n)]

    def windows(self, question: str, sources: Sequence[str], response: str) -> list[Window]:
        """Every window of the context beside every part of the response."""
        context = self.context_ids(question, sources)
        out = []
        for part, (r_ids, r_off) in enumerate(self.response_parts(response)):
            room = self.max_length - len(r_ids) - 3
            for s in window_starts(len(context), room):
                out.append(self.window(context[s : s + room], r_ids, r_off, part))
        return out

    def window(
        self, context: list[int], r_ids: list[int], r_off: list[tuple[int, int]], part: int = 0
    ) -> Window:
        ids = [self.cls, *context, self.sep, *r_ids, self.sep]
        types = [0] * (len(context) + 2) + [1] * (len(r_ids) + 1)
        chars: list[tuple[int, int] | None] = [None] * (len(context) + 2)
        chars += [*r_off, None]
        return Window(ids, types, chars, part)

    def best_window(self, question: str, sources: Sequence[str], response: str) -> Window:
        """For training: the window sharing most token ids with the response (its first part)."""
        context = self.context_ids(question, sources)
        r_ids, r_off = self.response_parts(response)[0]
        room = self.max_length - len(r_ids) - 3
        if len(context) <= room:
            return self.window(context, r_ids, r_off)
        said = set(r_ids)
        best = max(window_starts(len(context), room), key=lambda s: len(said & set(context[s : s + room])))
        return self.window(context[best : best + room], r_ids, r_off)

    def batch(self, windows: Sequence[Window]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        width = max(len(w.ids) for w in windows)
        ids = np.full((len(windows), width), self.pad, dtype=np.int64)
        types = np.zeros((len(windows), width), dtype=np.int64)
        mask = np.zeros((len(windows), width), dtype=np.int64)
        for row, w in enumerate(windows):
            ids[row, : len(w.ids)] = w.ids
            types[row, : len(w.ids)] = w.type_ids
            mask[row, : len(w.ids)] = 1
        return ids, mask, types


def window_starts(n: int, room: int) -> list[int]:
    """Where each window of `room` tokens starts over `n` context tokens: overlapping by
    WINDOW_OVERLAP (at most half a window), the last one ending with the context."""
    if n <= room:
        return [0]
    step = max(room // 2, room - WINDOW_OVERLAP, 1)
    return [*range(0, n - room, step), n - room]


def detection(windows: Sequence[Window], probs: Sequence[np.ndarray], threshold: float) -> Detection:
    """A token's P is the least any window gives it; spans are runs at or over the threshold."""
    least: dict[tuple[int, int], float] = {}
    for w, p in zip(windows, probs, strict=True):
        for chars, q in zip(w.response_chars, p, strict=False):
            if chars is not None:
                least[chars] = min(least.get(chars, 1.0), float(q))
    tokens = tuple((a, b, round(q, 4)) for (a, b), q in sorted(least.items()))
    spans: list[tuple[int, int, float]] = []
    for a, b, q in tokens:
        if q < threshold:
            continue
        if spans and a - spans[-1][1] <= 1:
            s = spans[-1]
            spans[-1] = (s[0], b, max(s[2], q))
        else:
            spans.append((a, b, q))
    top = max((q for _, _, q in tokens), default=0.0)
    return Detection(round(top, 4), tuple(spans), len(windows), tokens)


def window_settings(model_dir: Path) -> tuple[int, int]:
    """The window sizes a model was trained with: its config.json's `window_max_length` and
    `window_response_tokens` (what training writes), else its train_config.json's, else the
    defaults."""
    import json

    for name, keys in (
        ("config.json", ("window_max_length", "window_response_tokens")),
        ("train_config.json", ("max_length", "max_response_tokens")),
    ):
        path = model_dir / name
        if path.exists():
            d = json.loads(path.read_text())
            if keys[0] in d:
                return int(d[keys[0]]), int(d.get(keys[1], MAX_RESPONSE_TOKENS))
    return MAX_LENGTH, MAX_RESPONSE_TOKENS


class _Detector:
    """Windows in, per-token P(unsupported) out; subclasses run the model (`_probs`)."""

    windows: Windows
    threshold: float
    batch_size: int

    def _probs(self, ids: np.ndarray, mask: np.ndarray, types: np.ndarray) -> np.ndarray:
        raise NotImplementedError  # (batch, sequence) P(unsupported)

    def detect(self, question: str, sources: Sequence[str], response: str) -> Detection:
        ws = self.windows.windows(question, sources, response)
        probs: list[np.ndarray] = []
        for i in range(0, len(ws), self.batch_size):
            chunk = ws[i : i + self.batch_size]
            p = self._probs(*self.windows.batch(chunk))
            probs += [p[j, : len(w.ids)] for j, w in enumerate(chunk)]
        return detection(ws, probs, self.threshold)


class TorchDetector(_Detector):
    """The detector from a transformers token-classification directory (training, evaluation)."""

    def __init__(self, model_dir: str, threshold: float = 0.5, device: str = "cpu", batch_size: int = 8):
        import torch
        from tokenizers import Tokenizer
        from transformers import AutoModelForTokenClassification

        self._torch = torch
        self.model = AutoModelForTokenClassification.from_pretrained(model_dir).to(device).eval()
        self.windows = Windows(
            Tokenizer.from_file(f"{model_dir}/tokenizer.json"), *window_settings(Path(model_dir))
        )
        self.threshold, self.device, self.batch_size = threshold, device, batch_size

    def _probs(self, ids: np.ndarray, mask: np.ndarray, types: np.ndarray) -> np.ndarray:
        t = self._torch
        with t.inference_mode():
            logits = self.model(
                input_ids=t.from_numpy(ids).to(self.device),
                attention_mask=t.from_numpy(mask).to(self.device),
                token_type_ids=t.from_numpy(types).to(self.device),
            ).logits
        return np.asarray(t.softmax(logits.float(), dim=-1)[..., 1].cpu().numpy())


class OnnxDetector(_Detector):
    """The exported detector (`ragmend detector export`): model.onnx, tokenizer.json, config.json."""

    def __init__(self, model_dir: Path, threshold: float = 0.5, batch_size: int = 8, threads: int = 0):
        import onnxruntime as ort
        from tokenizers import Tokenizer

        from ragmend.models.runtime import onnx_session_options

        for name in ("model.onnx", "tokenizer.json"):
            if not (model_dir / name).exists():
                raise ModelUnavailable(f"detector model file missing: {model_dir / name}")
        self._session = ort.InferenceSession(
            str(model_dir / "model.onnx"), onnx_session_options(threads), providers=["CPUExecutionProvider"]
        )
        self._inputs = {i.name for i in self._session.get_inputs()}
        self.windows = Windows(
            Tokenizer.from_file(str(model_dir / "tokenizer.json")), *window_settings(model_dir)
        )
        self.threshold, self.batch_size = threshold, batch_size

    def _probs(self, ids: np.ndarray, mask: np.ndarray, types: np.ndarray) -> np.ndarray:
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        (logits,) = self._session.run(["logits"], {k: v for k, v in feed.items() if k in self._inputs})
        z = logits - logits.max(axis=-1, keepdims=True)
        e = np.exp(z)
        return np.asarray(e[..., 1] / e.sum(axis=-1))


Detector = TorchDetector | OnnxDetector


def open_detector(model_dir: Path, threshold: float = 0.5) -> Detector:
    """The ONNX export where the directory holds one, else the transformers model."""
    if (model_dir / "model.onnx").exists():
        return OnnxDetector(model_dir, threshold)
    return TorchDetector(str(model_dir), threshold)
