"""What the NLI model is asked: hypotheses built from the query, the response and the label.

Query signal (e_q). A question is not a proposition, so an NLI model cannot judge "the evidence
answers it" from the question alone. Constructions (diagnosis.query_hypothesis; compared on
HotpotQA dev in docs/diagnosis.md):
  statement   the question turned into a statement with the generated answer in its slot
              ("Who directed Jaws?" + "Steven Spielberg" -> "Steven Spielberg directed Jaws.")
  question    the raw question (the paper's literal reading: query as hypothesis)
  rerank      no NLI: the ms-marco cross-encoder's relevance of the best passage decides
In claim mode the claim itself is the hypothesis.

Response signal (e_r). The response is split into sentences (claims); each must be entailed.
In claim mode the response is "LABEL, reason": the reason sentences are the claims; a bare label
asserts the claim (SUPPORTS), its negation (REFUTES) or nothing decidable (NOT ENOUGH INFO).
"""

from __future__ import annotations

import re

from ragmend.diagnosis.patterns import ABBREVIATION_END, SENTENCE_END
from ragmend.diagnosis.spans import COMMON_WORDS
from ragmend.diagnosis.types import CLAIM_LABELS

QUERY_CONSTRUCTIONS = ("statement", "question", "rerank")

_ABSTAIN = re.compile(
    r"\b(i don'?t know|not (?:enough|sufficient) information|cannot (?:be )?determine)", re.I
)
_LIST_MARKER = re.compile(r"(?m)^[ \t]*(?:[-*\u2022]|\d{1,2}[.)])[ \t]+")
# A citation marker, "[1]" or "[1, 2]", with the space before it: a generator's or ragmend's own.
CITATION_MARK = re.compile(r"\s*\[\d+(?:,\s*\d+)*\]")


# A sentence reporting what the sources say ("Passage [1] clearly states that X", "According to
# the passages, X"), and a comment on the claim checked (", which directly supports the claim"):
# neither names a fact of the world, and NLI reads a passage as contradicting the frame.
_REPORT_FRAME = re.compile(
    r"^(?:according to (?:the )?(?:passages?|sources?|text|evidence)(?: \d+)?,\s*"
    r"|(?:the |this )?(?:passages?|sources?|text|evidence)(?: \d+)? (?:\w+ly )?"
    r"(?:states?|says?|mentions?|notes?|indicates?|shows?|confirms?|explains?|reports?)(?: that)?\s+)",
    re.I,
)
_CLAIM_COMMENT = re.compile(r",?\s+which (?:\w+ly )?(?:supports|contradicts|refutes|confirms)\b.*$", re.I)


def split_sentences(text: str, keep: str = "") -> list[str]:
    """The sentences of a text: split after . ! ? before a capital, digit or quote, and at line
    breaks (patterns.SENTENCE_END), but not after an initial or a common abbreviation
    (patterns.ABBREVIATION_END), nor where the words on both sides of the break stand together in
    `keep` (the question: a name with full stops in it, "the magazine Sam Duckworth got his name
    Get Cape. Wear Cape. Fly from", is one span)."""
    kept = " ".join(keep.split()).lower()
    parts: list[str] = []
    for piece in (p.strip() for p in SENTENCE_END.split(text)):
        if parts and (ABBREVIATION_END.search(parts[-1]) or _held_together(parts[-1], piece, kept)):
            parts[-1] = f"{parts[-1]} {piece}"  # "J. D. Fetzer", "Dr. No": not a sentence end
        elif piece:
            parts.append(piece)
    return parts


def _held_together(before: str, after: str, kept: str) -> bool:
    if not kept or not after:
        return False
    return " ".join([*before.split()[-2:], *after.split()[:2]]).lower() in kept


def split_claims(text: str, max_claims: int = 8, keep: str = "") -> list[str]:
    """Sentences of a response, without citations like [1], list markers and empty fragments.
    A line ending in ':' introduces what follows ("Here is an overview:"); it asserts nothing, nor
    does a lead-in before a colon ("The answer is: ..."); a sentence reporting what a passage says
    claims what it reports (`_reported`).
    `keep`: the question, whose spans are not split (split_sentences)."""
    text = _without_marks(text)
    claims = [_reported(_without_lead_in(p)) for p in split_sentences(text, keep) if not p.endswith(":")]
    return [p for p in claims if len(p.split()) >= 2 or any(c.isdigit() for c in p)][:max_claims] or (
        [text] if text else []
    )


def sentence_count(response: str) -> int:
    """How many sentences a response makes, read as its claims are (citations and list markers
    left out): a sentence may hold several claims, a list item is one sentence."""
    return len(split_sentences(_without_marks(response)))


def _without_marks(text: str) -> str:
    return _LIST_MARKER.sub("", CITATION_MARK.sub("", text)).strip()


def _reported(sentence: str) -> str:
    """What a sentence reporting the sources says of the world: without the report's frame and
    without a comment on the claim checked ("The passage states that X, which supports the
    claim." -> "X."); any other sentence as it is."""
    framed = _REPORT_FRAME.match(sentence)
    if framed is None:
        return sentence
    rest = _CLAIM_COMMENT.sub("", sentence[framed.end() :]).strip()
    if len(rest.split()) < 2:
        return sentence
    end = "" if rest[-1] in ".!?" else "."
    return rest[0].upper() + rest[1:] + end


def _without_lead_in(sentence: str) -> str:
    """A sentence without a lead-in of a few plain words before a colon ("The answer is: X",
    "In short: X"): what follows is the claim. A head holding a name after its first word or a
    number ("Paris, France: X", "Phase 2: X") is kept: it may be part of what is claimed."""
    head, sep, tail = sentence.partition(": ")
    words = head.split()
    plain = all(w.islower() for w in words[1:]) and not any(c.isdigit() for c in head)
    if sep and len(tail.split()) >= 2 and 0 < len(words) <= 4 and plain:
        return tail.strip()
    return sentence


def is_abstention(response: str) -> bool:
    return bool(_ABSTAIN.search(response))


def parse_claim_label(response: str) -> tuple[str | None, str]:
    """(label, reason) from a claim-mode response "LABEL. reason"; label None when absent."""
    text = response.strip()
    up = text.upper()
    for label in sorted(CLAIM_LABELS, key=len, reverse=True):
        at = up.find(label)
        if 0 <= at <= 10:  # the label leads (after a quote, "Label:" or a bullet)
            return label, text[at + len(label) :].lstrip(" .:,-\n").strip()
    if up.startswith(("NOT ENOUGH", "NEI", "UNVERIFIED")):
        return "NOT ENOUGH INFO", ""
    return None, text


def negate(claim: str) -> str:
    """The claim negated, "It is not true that ...", its first word lower-cased unless it begins a
    name."""
    first = claim.split(maxsplit=1)[0] if claim.strip() else ""
    lead = claim[:1].lower() if first.lower() in COMMON_WORDS else claim[:1]
    return f"It is not true that {lead}{claim[1:].rstrip('.')}."
