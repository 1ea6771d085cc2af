"""NLI role: a 3-way cross-encoder, premise (evidence) against hypothesis (query, claim, answer).

Probabilities always come back in NLI_ORDER whatever the model's own label order, read from its
config's id2label. Only the premise is truncated: the hypothesis is what is being judged (a
hypothesis that alone overflows the limit is the one exception; it is cut and flagged too).

Two runtimes share one encoding core (`_CrossEncoderNLI`): an ONNX graph run by onnxruntime
(ragmend's shipped int8 model, one pair per run so a pair's probabilities never depend on the
pairs beside it; no torch on the request path) and any transformers sequence-classification model
(a local directory or, with `models.allow_hub`, a hub id such as cross-encoder/nli-deberta-v3-base),
whose pairs are sorted by length before batching so a batch pads to its own longest pair.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ragmend.errors import ModelUnavailable
from ragmend.models import bundled
from ragmend.models.runtime import OnnxPairRunner, prepare_libraries, quiet_transformers
from ragmend.settings import ModelsSettings

NLI_ORDER = ("entailment", "neutral", "contradiction")
# The answer for a pair with nothing to judge (an empty side): certainly neutral.
EMPTY_PAIR = np.array([0.0, 1.0, 0.0], dtype=np.float32)


@dataclass(frozen=True)
class NLIBatch:
    probs: np.ndarray  # (n, 3) in NLI_ORDER
    truncated: tuple[bool, ...]  # premise cut to fit max_length


def label_permutation(id2label: dict[Any, str]) -> list[int]:
    """Model output column for each of NLI_ORDER; accepts the usual spellings."""
    names = {int(i): str(n).lower() for i, n in id2label.items()}
    aliases = {
        "entailment": ("entailment", "entail", "supports"),
        "neutral": ("neutral", "not_enough_info", "nei"),
        "contradiction": ("contradiction", "contradict", "refutes"),
    }
    cols = []
    for canonical in NLI_ORDER:
        found = [i for i, n in names.items() if n in aliases[canonical]]
        if len(found) != 1:
            raise ModelUnavailable(
                f"NLI model labels {sorted(names.values())} do not name '{canonical}' once"
            )
        cols.append(found[0])
    return cols


def read_temperature(model_dir: Path) -> float:
    """The calibration temperature stored beside a model (1.0, i.e. none, when absent)."""
    calib = model_dir / "calibration.json"
    if not calib.exists():
        return 1.0
    try:
        t = float(json.loads(calib.read_text())["temperature"])
    except (ValueError, KeyError, TypeError) as e:
        raise ModelUnavailable(f"{calib} is not a calibration file: {e}") from e
    if not t > 0:
        raise ModelUnavailable(f"{calib}: temperature must be positive, got {t}")
    return t


@dataclass(frozen=True)
class _Encoded:
    ids: list[int]
    type_ids: list[int]
    truncated: bool


class _CrossEncoderNLI:
    """Tokenise pairs (premise-only truncation), batch by length, softmax with temperature."""

    def __init__(self, tokenizer: Any, id2label: dict[Any, str], max_length: int, batch_size: int):
        # `tokenizer` is a `tokenizers.Tokenizer`; our own copy, with truncation and padding off,
        # because those settings are mutable state on the object.
        self._tokenizer = tokenizer
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()
        self._pad_id = self._tokenizer.token_to_id("[PAD]") or self._tokenizer.token_to_id("<pad>") or 0
        self.columns = label_permutation(id2label)
        self.max_length = max_length
        self.batch_size = batch_size
        self.temperature = 1.0
        self._lock = threading.Lock()

    def _logits(self, ids: np.ndarray, mask: np.ndarray, type_ids: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def count_tokens(self, premise: str, hypothesis: str) -> int:
        """Tokens of the pair as the model sees it before truncation (special tokens included)."""
        with self._lock:
            return len(self._tokenizer.encode(premise, hypothesis).ids)

    def _encode(self, premises: list[str], hypotheses: list[str]) -> list[_Encoded]:
        encs = self._tokenizer.encode_batch(list(zip(premises, hypotheses, strict=True)))
        out = []
        for enc in encs:
            ids, types = enc.ids, enc.type_ids
            over = len(ids) - self.max_length
            if over <= 0:
                out.append(_Encoded(ids, types, False))
                continue
            # Drop premise tokens from its end (just before its closing separator); only when the
            # premise is gone entirely does the hypothesis lose its own tail.
            seq = enc.sequence_ids
            premise_pos = [i for i, s in enumerate(seq) if s == 0]
            cut = premise_pos[len(premise_pos) - min(over, len(premise_pos)) :]
            keep = np.ones(len(ids), dtype=bool)
            keep[cut] = False
            over -= len(cut)
            if over > 0:
                hyp_pos = [i for i, s in enumerate(seq) if s == 1]
                keep[hyp_pos[len(hyp_pos) - over :]] = False
            out.append(
                _Encoded(
                    [t for t, k in zip(ids, keep, strict=True) if k],
                    [t for t, k in zip(types, keep, strict=True) if k],
                    True,
                )
            )
        return out

    @property
    def runs(self) -> str:
        """How pairs meet the model, for benchmark reports."""
        return f"batch {self.batch_size}"

    def _run(self, encoded: list[_Encoded]) -> np.ndarray:
        """Logits, one row per encoded pair, in order: batches of similar length, so a batch pads
        little (a torch model in float keeps a pair's logits whatever its batch-mates)."""
        out: np.ndarray | None = None
        order = sorted(range(len(encoded)), key=lambda j: len(encoded[j].ids))
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            width = max(len(encoded[j].ids) for j in chunk)
            ids = np.full((len(chunk), width), self._pad_id, dtype=np.int64)
            types = np.zeros((len(chunk), width), dtype=np.int64)
            mask = np.zeros((len(chunk), width), dtype=np.int64)
            for row, j in enumerate(chunk):
                e = encoded[j]
                ids[row, : len(e.ids)] = e.ids
                types[row, : len(e.ids)] = e.type_ids
                mask[row, : len(e.ids)] = 1
            logits = self._logits(ids, mask, types)
            if out is None:
                out = np.zeros((len(encoded), logits.shape[1]), dtype=np.float64)
            out[chunk] = logits
        assert out is not None  # predict passes at least one pair
        return out

    def predict(self, pairs: list[tuple[str, str]]) -> NLIBatch:
        probs = np.tile(EMPTY_PAIR, (len(pairs), 1))
        truncated = [False] * len(pairs)
        live = [i for i, (p, h) in enumerate(pairs) if p.strip() and h.strip()]
        if not live:
            return NLIBatch(probs.astype(np.float32), tuple(truncated))
        with self._lock:
            encoded = self._encode([pairs[i][0] for i in live], [pairs[i][1] for i in live])
        logits = self._run(encoded).astype(np.float64) / self.temperature
        logits -= logits.max(axis=1, keepdims=True)
        p = np.exp(logits)
        p /= p.sum(axis=1, keepdims=True)
        for row, i in enumerate(live):
            probs[i] = p[row, self.columns]
            truncated[i] = encoded[row].truncated
        return NLIBatch(probs.astype(np.float32), tuple(truncated))


class OnnxNLI(_CrossEncoderNLI):
    """An exported cross-encoder: model.onnx, tokenizer.json, config.json (id2label), run one pair
    per call (OnnxPairRunner says why); batch_size is kept for the signature shared with torch."""

    def __init__(self, model_dir: Path, max_length: int = 256, batch_size: int = 16, workers: int = 0):
        from tokenizers import Tokenizer

        files = {n: model_dir / n for n in ("model.onnx", "tokenizer.json", "config.json")}
        for p in files.values():
            if not p.exists():
                raise ModelUnavailable(f"NLI model file missing: {p}")
        config = json.loads(files["config.json"].read_text())
        limit = int(config.get("max_position_embeddings", max_length))
        super().__init__(
            Tokenizer.from_file(str(files["tokenizer.json"])),
            config.get("id2label", {}),
            min(max_length, limit),
            batch_size,
        )
        self._runner = OnnxPairRunner(str(files["model.onnx"]), "NLI", workers)
        self.temperature = read_temperature(model_dir)

    @property
    def runs(self) -> str:
        return f"one pair per run, {self._runner.workers} at once"

    def _run(self, encoded: list[_Encoded]) -> np.ndarray:
        return self._runner.logits([(e.ids, e.type_ids) for e in encoded])


class TransformersNLI(_CrossEncoderNLI):
    """Any transformers sequence-classification NLI model (a local directory or a hub id)."""

    def __init__(
        self, model: str, max_length: int = 256, batch_size: int = 16, device: str = "cpu", bf16: bool = False
    ):
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        quiet_transformers()
        self.device = device
        try:
            tokenizer = AutoTokenizer.from_pretrained(model)
            self.model = AutoModelForSequenceClassification.from_pretrained(model).eval().to(device)
        except (OSError, ValueError) as e:
            raise ModelUnavailable(f"NLI model '{model}' could not be loaded: {e}") from e
        if bf16:  # for bulk labelling (a teacher): ~1.7x faster on CPUs with avx512_bf16
            import torch

            self.model.to(torch.bfloat16)
        if not getattr(tokenizer, "is_fast", False):
            raise ModelUnavailable(f"NLI model '{model}' has no fast tokenizer (tokenizer.json)")
        self.tokenizer = tokenizer
        limit = int(getattr(self.model.config, "max_position_embeddings", max_length))
        super().__init__(
            tokenizer.backend_tokenizer.__class__.from_str(tokenizer.backend_tokenizer.to_str()),
            self.model.config.id2label,
            min(max_length, limit),
            batch_size,
        )
        self.temperature = read_temperature(Path(model))
        # Some architectures (RoBERTa-style, DistilBERT) take no token_type_ids.
        self._accepted = set(inspect.signature(self.model.forward).parameters)

    def _logits(self, ids: np.ndarray, mask: np.ndarray, type_ids: np.ndarray) -> np.ndarray:
        import torch

        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": type_ids}
        with torch.inference_mode():
            tensors = {
                k: torch.from_numpy(v).to(self.device) for k, v in feeds.items() if k in self._accepted
            }
            return self.model(**tensors).logits.float().cpu().numpy()


NLIModel = OnnxNLI | TransformersNLI


def open_nli(
    path: str, max_length: int = 256, batch_size: int = 16, device: str = "cpu", bf16: bool = False
) -> NLIModel:
    """A model directory with model.onnx runs on onnxruntime (CPU); anything else, or any model
    asked for on a GPU, on transformers (in bf16 if asked)."""
    if device == "cpu" and (Path(path) / "model.onnx").exists():
        return OnnxNLI(Path(path), max_length, batch_size)
    return TransformersNLI(path, max_length, batch_size, device=device, bf16=bf16)


def nli_source(models: ModelsSettings) -> tuple[str, str]:
    spec = models.nli.model
    if spec is None:
        raise ModelUnavailable("no NLI model configured (models.nli.model)")
    return bundled.resolve_spec(spec, "nli", models.allow_hub)


def load_nli(models: ModelsSettings) -> NLIModel:
    prepare_libraries(models.allow_hub)
    _, path = nli_source(models)
    return open_nli(path, models.nli.max_length, models.nli.batch_size)


WEIGHT_FILES = ("model.onnx", "model.safetensors", "pytorch_model.bin")


def nli_identity(models: ModelsSettings) -> str:
    """Which NLI model this configuration judges with: the spec and, for a model on disk, the first
    12 hex digits of its weights' sha256, so records made with other weights under the same name
    (a retrained bundled model) are told apart. A hub id is its own identity."""
    spec = models.nli.model
    if spec is None:
        return "none"
    try:
        _, where = nli_source(models)
    except ModelUnavailable:
        return spec
    weights = next((Path(where) / f for f in WEIGHT_FILES if (Path(where) / f).is_file()), None)
    if weights is None:
        return spec
    with weights.open("rb") as f:
        digest = hashlib.file_digest(f, "sha256").hexdigest()
    return f"{spec} ({weights.name} sha256 {digest[:12]})"
