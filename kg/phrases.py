"""The strings the graph compares: normalised phrases, relation phrases, number keys, embeddings.

Subjects, relations and objects are compared by the cosine similarity of their sentence
embeddings. Embedding the raw text would make "The film" and "film" two phrases and two
embeddings, so every argument is normalised first (lower case, no leading article, single spaces)
and the store caches one embedding per distinct normalised phrase.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any, Protocol

import numpy as np

# list of texts -> (n, d) float32, rows L2-normalised (so cosine similarity is a dot product)
Embed = Callable[[list[str]], np.ndarray]

_ARTICLE = re.compile(r"^(?:the|a|an)\s+")
_SPACES = re.compile(r"\s+")
# Quotes, brackets and sentence punctuation around an argument say nothing about what it names.
_EDGE_PUNCT = "\"'`.,;:!?()[]{}«»“”‘’ "

# Spelled-out numbers and the words around numbers that do not change them, so that "two" and "2"
# or "about 5 million" and "5 million" get the same key while "5 million" and "5 billion" do not.
_NUMBER_WORDS = {
    w: str(i)
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "  # noqa: SIM905
        "fifteen sixteen seventeen eighteen nineteen twenty".split()
    )
}
_NUMBER_FILLERS = frozenset(
    "the a an of and in on at by to from about around approximately nearly almost some over "  # noqa: SIM905
    "under more than less just roughly circa c. ca.".split()
)
_WORD = re.compile(r"[^\W\d_][\w'’.-]*")
# Capitalised only because a title or a sentence starts with them.
_NAME_FILLERS = frozenset(
    "the a an of in on at by to for and or from with".split()  # noqa: SIM905
)
_NUMBER_TOKEN = re.compile(r"[a-z]+\.?|\d+(?:\.\d+)?%?|[$€£¥%]")


def normalise_phrase(text: str) -> str:
    """The key under which a subject or object is embedded and compared."""
    t = _SPACES.sub(" ", text.lower()).strip(_EDGE_PUNCT)
    return _ARTICLE.sub("", t)


def relation_phrase(relation: str) -> str:
    """What is embedded for a relation: "bear_in" reads as "bear in" to a sentence encoder."""
    return _SPACES.sub(" ", relation.replace("_", " ").lower()).strip()


def normalise_relation(text: str) -> str:
    """The stored form of a relation: lower case, words joined by underscores ("bear_in")."""
    return "_".join(text.lower().replace("_", " ").split())


class Statement(Protocol):
    """What kg.triples.Triple offers here (a Protocol: kg.triples imports this module)."""

    @property
    def subject(self) -> str: ...
    @property
    def relation(self) -> str: ...
    @property
    def object(self) -> str: ...


def triple_phrases(t: Statement) -> tuple[str, str, str]:
    """The three strings a triple is embedded and compared by."""
    return normalise_phrase(t.subject), relation_phrase(t.relation), normalise_phrase(t.object)


def number_key(numbers: Iterable[str]) -> frozenset[str]:
    """The comparable content of a triple's numbers: digits, scale words and month names.

    "1867" agrees with "7 November 1867" (keys_agree: the response is merely less precise) and
    disagrees with "1868".
    """
    out: set[str] = set()
    for n in numbers:
        for tok in _NUMBER_TOKEN.findall(n.lower().replace(",", "")):
            if tok in _NUMBER_FILLERS:
                continue
            out.add(_NUMBER_WORDS.get(tok, tok))
    return frozenset(out)


def name_key(text: str) -> frozenset[str]:
    """The capitalised words of an argument ("the capital of France" -> {"france"}).

    Sentence embeddings place two cities, two films or two prizes close together ("Titanic" and
    "Jaws": 0.54 with MiniLM, over the 0.5 object threshold), so names, like numbers, are compared
    as sets: "Steven Spielberg" agrees with "Spielberg", "Jaws" does not agree with "Titanic".
    """
    words = (w.removesuffix("'s").removesuffix("’s") for w in _WORD.findall(text))
    return frozenset(w.lower() for w in words if w[:1].isupper() and w.lower() not in _NAME_FILLERS)


def keys_agree(a: frozenset[str], b: frozenset[str]) -> bool:
    """Number or name keys agree when either is empty or one holds the other (less precise, not wrong)."""
    return a <= b or b <= a


# Phrases are a few tokens long: a batch of 256 costs about what a batch of 16 chunks does, and
# on 2 shared cores 1,000 two-word phrases took 14 CPU-s at batch 32 and 3.8 at batch 512
# (per-batch thread synchronisation, not arithmetic, dominates such small batches).
PHRASE_BATCH = 256


def embed_with(model: Any, batch_size: int = PHRASE_BATCH) -> Embed:
    """An Embed over a llama-index embedding model (`get_text_embedding_batch`).

    The model is shallow-copied with its own batch size (the encoder itself is shared), so the
    ingest's chunk batch size stays as configured.
    """
    if hasattr(model, "model_copy") and hasattr(model, "embed_batch_size"):
        model = model.model_copy(update={"embed_batch_size": batch_size})

    def embed(texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return unit_rows(np.asarray(model.get_text_embedding_batch(texts), dtype=np.float32))

    return embed


class Memoized:
    """An Embed that remembers its last `size` texts' rows: one request embeds its question for
    the diagnosis, the repair's context and the router's; the encoder runs once for it.

    >>> calls = []
    >>> def embed(texts):
    ...     calls.append(list(texts))
    ...     return np.eye(3, dtype=np.float32)[[len(t) % 3 for t in texts]]
    >>> memo = Memoized(embed, size=2)
    >>> memo(["ab", "c"]).tolist(), memo(["c", "ab", "xyz"]).tolist()
    ([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0]], [[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
    >>> calls  # "ab" and "c" were remembered; only "xyz" was new
    [['ab', 'c'], ['xyz']]
    """

    def __init__(self, embed: Embed, size: int = 256):
        self._embed = embed
        self._size = size
        self._rows: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            known = {t: self._rows[t] for t in texts if t in self._rows}
            for t in known:
                self._rows.move_to_end(t)
        new = list(dict.fromkeys(t for t in texts if t not in known))
        if new:
            for t, row in zip(new, self._embed(new), strict=True):
                known[t] = row
            with self._lock:
                for t in new:
                    self._rows[t] = known[t]
                while len(self._rows) > self._size:
                    self._rows.popitem(last=False)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([known[t] for t in texts])


def unit_rows(m: np.ndarray) -> np.ndarray:
    """Rows scaled to length 1; the store does this too, whatever the embed function promised."""
    m = np.asarray(m, dtype=np.float32)
    if m.ndim != 2:
        raise ValueError(f"an embed function must return a 2-d array, got shape {m.shape}")
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    return m / np.where(norms > 0, norms, 1.0)
