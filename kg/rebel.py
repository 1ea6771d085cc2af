"""REBEL (Babelscape/rebel-large): seq2seq triple extraction, for deployments with a model hub.

REBEL writes the triples of a text as one linearised string,
"<s><triplet> head <subj> tail <obj> relation <subj> tail2 <obj> relation2 <triplet> ...</s>",
with Wikidata relation names ("place of birth"). It cannot mark negation, so `negated` is always
False; numbers are whatever digits the tail holds. Its relations do not match the spaCy
extractor's verb lemmas: a knowledge graph and the responses aligned against it must use the same
extractor (the store re-extracts everything when the extractor changes).
"""

from __future__ import annotations

import re

from ragmend.errors import ModelUnavailable
from ragmend.kg.phrases import normalise_relation
from ragmend.kg.triples import Triple
from ragmend.models.bundled import resolve_local_or_hub
from ragmend.models.runtime import prepare_libraries, quiet_transformers
from ragmend.settings import Settings

DEFAULT_MODEL = "Babelscape/rebel-large"

_MARKER = re.compile(r"(<triplet>|<subj>|<obj>)")
_NOISE = re.compile(r"<s>|</s>|<pad>")
_HAS_NUMBER = re.compile(
    r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|hundred|thousand|million|billion)\b", re.I
)


def parse_rebel(text: str) -> list[tuple[str, str, str]]:
    """The (subject, relation, object) triplets of REBEL's linearised output, in order.

    Note the order: REBEL writes head, tail, relation; this returns head, relation, tail.
    Malformed groups (a missing head, tail or relation) are skipped, not guessed at.
    """
    triplets: list[tuple[str, str, str]] = []
    head = tail = ""
    state = ""
    for part in _MARKER.split(_NOISE.sub(" ", text)):
        if part == "<triplet>":
            state, head, tail = "head", "", ""
        elif part == "<subj>":
            state, tail = "tail", ""
        elif part == "<obj>":
            state = "relation"
        else:
            words = " ".join(part.split())
            if state == "head":
                head = words
            elif state == "tail":
                tail = words
            elif state == "relation":
                if head and tail and words:
                    triplets.append((head, words, tail))
                # Text after a relation belongs to nothing until the next marker.
                state = ""
    return triplets


class RebelTripleExtractor:
    """REBEL behind the TripleExtractor interface.

    `model` is a local directory or, with allow_hub, a hub id; anything else raises
    ModelUnavailable at construction, before transformers is even imported.
    """

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        allow_hub: bool = False,
        max_triples_per_text: int = 32,
        batch_size: int = 4,
        max_input_tokens: int = 256,
        max_output_tokens: int = 256,
        num_beams: int = 3,
        device: str = "cpu",
    ):
        # Raises ModelUnavailable, naming models.allow_hub, for a hub id while the hub is off.
        path = resolve_local_or_hub(model, "REBEL triple extraction", allow_hub)
        prepare_libraries(allow_hub)
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

        quiet_transformers()
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(path)
            self.model = AutoModelForSeq2SeqLM.from_pretrained(path).to(device).eval()
        except (OSError, ValueError) as e:
            raise ModelUnavailable(f"REBEL model '{model}' could not be loaded: {e}") from e
        self.name = f"rebel:{model}"
        self.device = device
        self.max_triples_per_text = max_triples_per_text
        self.batch_size = batch_size
        self.max_input_tokens = max_input_tokens
        self.max_output_tokens = max_output_tokens
        self.num_beams = num_beams

    @classmethod
    def from_settings(cls, settings: Settings) -> RebelTripleExtractor:
        return cls(
            settings.kg.rebel_model,
            allow_hub=settings.models.allow_hub,
            max_triples_per_text=settings.kg.max_triples_per_chunk,
            device=settings.models.embeddings.device,
        )

    def extract(self, texts: list[str]) -> list[list[Triple]]:
        import torch

        out: list[list[Triple]] = [[] for _ in texts]
        todo = [i for i, t in enumerate(texts) if t.strip()]
        for b in range(0, len(todo), self.batch_size):
            idx = todo[b : b + self.batch_size]
            enc = self.tokenizer(
                [texts[i] for i in idx],
                max_length=self.max_input_tokens,
                padding=True,
                truncation=True,
                return_tensors="pt",
            ).to(self.device)
            with torch.inference_mode():
                generated = self.model.generate(
                    input_ids=enc["input_ids"],
                    attention_mask=enc["attention_mask"],
                    max_length=self.max_output_tokens,
                    num_beams=self.num_beams,
                    length_penalty=0.0,
                )
            # The markers are special tokens: they must survive decoding.
            decoded = self.tokenizer.batch_decode(generated, skip_special_tokens=False)
            for i, linearised in zip(idx, decoded, strict=True):
                out[i] = self._triples(texts[i], parse_rebel(linearised))
        return out

    def _triples(self, text: str, parsed: list[tuple[str, str, str]]) -> list[Triple]:
        triples: list[Triple] = []
        seen: set[tuple[str, str, str, bool]] = set()
        for head, relation, tail in parsed:
            t = Triple(
                subject=head,
                relation=normalise_relation(relation),
                object=tail,
                numbers=(tail,) if _HAS_NUMBER.search(tail) else (),
                sentence=text,
                subject_span=_find(text, head),
                object_span=_find(text, tail),
            )
            if t.key not in seen:
                seen.add(t.key)
                triples.append(t)
        return triples[: self.max_triples_per_text]


def _find(text: str, phrase: str) -> tuple[int, int]:
    """REBEL generates its arguments; they are often, not always, verbatim in the text."""
    i = text.lower().find(phrase.lower())
    return (i, i + len(phrase)) if i >= 0 else (-1, -1)
