"""NLI role: a 3-way cross-encoder, premise (evidence) against hypothesis (query, claim, answer).

Probabilities always come back in NLI_ORDER whatever the model's own label order, read from its
config's id2label. Only the premise is truncated: the hypothesis is what is being judged.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ragmend.errors import ModelUnavailable
from ragmend.models import bundled
from ragmend.models.runtime import prepare_libraries, quiet_transformers
from ragmend.settings import ModelsSettings

NLI_ORDER = ("entailment", "neutral", "contradiction")
# The answer for a pair with nothing to judge (an empty side): certainly neutral.
EMPTY_PAIR = np.array([0.0, 1.0, 0.0], dtype=np.float32)


@dataclass(frozen=True)
class NLIBatch:
    probs: np.ndarray  # (n, 3) in NLI_ORDER
    truncated: tuple[bool, ...]  # premise cut to fit max_length


def label_permutation(id2label: dict[int, str]) -> list[int]:
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


class TransformersNLI:
    def __init__(self, model: str, max_length: int = 256, batch_size: int = 16):
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        quiet_transformers()

        try:
            self.tokenizer = AutoTokenizer.from_pretrained(model)
            self.model = AutoModelForSequenceClassification.from_pretrained(model).eval()
        except (OSError, ValueError) as e:
            raise ModelUnavailable(f"NLI model '{model}' could not be loaded: {e}") from e
        self.columns = label_permutation(self.model.config.id2label)
        self.max_length = max_length
        self.batch_size = batch_size
        calib = Path(model) / "calibration.json"
        self.temperature = float(json.loads(calib.read_text())["temperature"]) if calib.exists() else 1.0
        self._lock = threading.Lock()

    def predict(self, pairs: list[tuple[str, str]]) -> NLIBatch:
        import torch

        probs = np.tile(EMPTY_PAIR, (len(pairs), 1))
        truncated = [False] * len(pairs)
        live = [i for i, (p, h) in enumerate(pairs) if p.strip() and h.strip()]
        for start in range(0, len(live), self.batch_size):
            idx = live[start : start + self.batch_size]
            premises = [pairs[i][0] for i in idx]
            hypotheses = [pairs[i][1] for i in idx]
            with self._lock, torch.inference_mode():
                enc = self.tokenizer(
                    premises,
                    hypotheses,
                    truncation="only_first",
                    max_length=self.max_length,
                    padding=True,
                    return_tensors="pt",
                )
                full = self.tokenizer(premises, hypotheses, truncation=False)["input_ids"]
                logits = self.model(**enc).logits.float() / self.temperature
            p = torch.softmax(logits, dim=-1).numpy()[:, self.columns]
            for j, i in enumerate(idx):
                probs[i] = p[j]
                truncated[i] = len(full[j]) > self.max_length
        return NLIBatch(probs.astype(np.float32), tuple(truncated))


def load_nli(models: ModelsSettings) -> TransformersNLI:
    prepare_libraries(models.allow_hub)
    spec = models.nli.model
    if spec is None:
        raise ModelUnavailable("no NLI model configured (models.nli.model); ragmend's own ships with issue 3")
    path = bundled.resolve_local_or_hub(spec, "nli", models.allow_hub)
    return TransformersNLI(path, models.nli.max_length, models.nli.batch_size)
