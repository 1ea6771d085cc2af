"""Compound claims split into the atomic claims they join, so each is judged against single
passage windows: two windows read together, or a window that settles one half of a claim and
says nothing of the other, must not decide it (docs/diagnosis.md)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ragmend.diagnosis.patterns import NAME_LOOSE
from ragmend.diagnosis.wordforms import verb_form

# "Both A and B are ...", "A and B are both ...", "Neither A nor B ...": one claim per subject.
_BOTH = re.compile(
    r"^(?:yes,?\s+|no,?\s+)?both\s+(?P<a>.+?)\s+and\s+(?P<b>.+?)\s+(?P<verb>are|were|have|had|do|did)\s+(?P<rest>.+)$",
    re.I,
)
_AND_BOTH = re.compile(
    r"^(?:yes,?\s+|no,?\s+)?(?P<a>.+?)\s+and\s+(?P<b>.+?)\s+(?P<verb>are|were|have|had)\s+both\s+(?P<rest>.+)$",
    re.I,
)
# "Yes, A and B are Y.": the answer to "Are A and B Y?" says the same of each without "both"; only
# after a yes, where the two are names (capitalised) and the predicate is not a relation between
# them ("... are from the same city", "... were married") nor a negation.
_YES_AND = re.compile(
    r"^(?i:yes),?\s+(?P<a>[A-Z].*?)\s+and\s+(?P<b>[A-Z].*?)\s+(?P<verb>are|were)\s+(?P<rest>(?!not\b).+)$"
)
# "A and B are located in Y.", with no yes before it: the same, where the sentence opens with the
# two names and nothing else (patterns.NAME_LOOSE: capitalised words, a few connectors, no comma:
# "Two other women, Noelle Velentzas and ..." or "Jag nominated Blue and Felicia for eviction, but
# they are ..." are no such subject), and the predicate is said of each: not of the two together,
# as one that begins with a determiner may be ("Simon and Garfunkel were a folk duo", "... were
# the founders of X").
_NAMES_AND = re.compile(
    rf"^(?P<a>{NAME_LOOSE})\s+and\s+(?P<b>{NAME_LOOSE})\s+(?P<verb>are|were)\s+(?P<rest>(?!not\b).+)$"
)
_TOGETHER = re.compile(
    r"^(?:a|an|the|one|two|among|part|each|all|co-\w+|members?|rivals|friends|cousins|twins"
    r"|neighbou?rs|opponents|competitors|colleagues)\b",
    re.I,
)
_BETWEEN_THEM = re.compile(
    r"\b(same|together|each other|one another|related|married|siblings|brothers|sisters|partners"
    r"|connected|similar|different|both|alike|equal)\b",
    re.I,
)
# What two named subjects do together, beyond `_BETWEEN_THEM` ("A and B are collaborating on a
# beer", "... have in common"): only where the sentence opens with the two names. After another
# clause the words say nothing of the two clauses ("... and Hawking has collaborated with Pink
# Floyd" is still a clause of its own).
_JOINT = re.compile(
    r"\b(partner\w*|collaborat\w*|merg\w*|compet\w*|allies|allied|common|between|versus|against)\b",
    re.I,
)
# One subject's auxiliary for two subjects' ("A and B are ..." -> "A is ...").
ONE_SUBJECT = {"are": "is", "were": "was", "have": "has", "had": "had", "do": "does", "did": "did"}
_PARTICLE = re.compile(r"^(?:yes|no),\s+(?=\S+\s+\S+\s+\S+)", re.I)


def decompose(claim: str) -> list[str]:
    """A compound claim as the atomic claims it joins, so each is checked against single passages
    and none is entailed by two passages read together: one subject per name ("Both A and B are
    in Michigan." -> "A is in Michigan.", "B is in Michigan."), one clause per subject ("A is a
    mountain and B is a mountain peak."), one predicate per verb ("A was written in 1843 and was
    adapted in 1908."). Any other claim is returned as it is, less a leading "Yes," or "No," (the
    clause after it is what is claimed; the NLI model reads the particle as words of the
    hypothesis)."""
    text = claim.strip()
    for pattern in (_BOTH, _AND_BOTH, _YES_AND, _NAMES_AND):
        m = pattern.match(text)
        if not m or len(m.group("a").split()) > 8 or len(m.group("b").split()) > 8:
            continue
        if pattern in (_YES_AND, _NAMES_AND) and _BETWEEN_THEM.search(m.group("rest")):
            continue
        if pattern is _NAMES_AND and (
            _JOINT.search(m.group("rest"))
            or _TOGETHER.match(m.group("rest"))
            or _elliptical(m.group("a"), m.group("b"))
        ):
            continue
        verb = ONE_SUBJECT[m.group("verb").lower()]
        rest = m.group("rest").rstrip(". ")
        rest = re.sub(r"^(?:located\s+)?both\s+", "", rest)
        if verb in ("is", "was"):
            rest = singular_predicate(rest)
        return [f"{_cap(m.group(s))} {verb} {rest}." for s in ("a", "b")]
    text = unprefixed(text)
    return split_conjunction(text) or [text]


def relates_the_two(predicate: str) -> bool:
    """The predicate says something of two subjects together ("... from the same city", "...
    collaborated on X"), not of each: no claim about one of them alone."""
    return bool(_BETWEEN_THEM.search(predicate) or _JOINT.search(predicate))


def _elliptical(a: str, b: str) -> bool:
    """One word before "and" and a longer name after it may share that name's last words: "Ed and
    Lorraine Warren", "North and South Korea", "Upper and Lower Saxony" (FEVER DEV: "Ed was a
    ghost hunter." is no claim the answer made). Without a yes (where the question named two
    things) such a pair is left whole; so, at this cost, is "Paris and New York"."""
    return len(a.split()) == 1 and len(b.split()) > 1


def unprefixed(claim: str) -> str:
    """A claim less a leading answer particle ("Yes, A is B." -> "A is B.")."""
    return _cap(_PARTICLE.sub("", claim.strip(), count=1))


def atomic_claims(claims: Sequence[str], limit: int) -> list[str]:
    """At most `limit` claims to judge: the first `limit` claims, each as its atomic parts
    (`decompose`) where the claims after it still fit, else whole (`unprefixed`). Why: parts must
    not push a later sentence past the limit, unread (RAGTruth's DEV sample: 19 more responses
    would have reached the limit of 8)."""
    kept = list(claims[:limit])
    atoms: list[str] = []
    for i, claim in enumerate(kept):
        parts = decompose(claim)
        room = limit - len(atoms) - (len(kept) - i - 1)
        atoms.extend(parts if len(parts) <= room else [unprefixed(claim)])
    return atoms


# Where two clauses or predicates may be joined: "..., and ...", "... and ...".
_AND = re.compile(r",?\s+and\s+")
# A second clause with a subject of its own: a name (capitalised words, a few lower-case
# connectors), then an auxiliary ("and Sherpi Kangri is a mountain peak").
_CLAUSE = re.compile(rf"^(?:[Tt]he\s+)?{NAME_LOOSE}\s+(?:is|was|are|were|has|had|have)\s+\S")
_PUNCTUATION = "\"'(),;:"
_RELATIVE = frozenset(("that", "who", "whom", "whose", "which", "what", "where", "when"))


def split_conjunction(text: str) -> list[str] | None:
    """Two clauses ("A is X and B is Y.") or one subject's two predicates ("A wrote X and directed
    Y.") as two claims, at the first "and" that joins such; None where none does. Why: the NLI
    model calls a right claim contradicted when a window settles one half and says nothing of the
    other.
    Cautious by design: the second predicate must begin with a verb of the first one's form (an
    auxiliary after any verb; a past after a past; a present in -s after one), so "was born in
    1946 and played ..." (passive or active?) and "writers and poets" stay one claim."""
    body = text.rstrip(". ")
    for m in _AND.finditer(body):
        left, right = body[: m.start()], body[m.end() :]
        if _inside_quotes(left):  # a title or a quoted question: "... did both X-Large and A ..."
            continue
        words = left.split()
        first = _first_verb(words)
        if first is None:
            continue
        form = verb_form(words[first].strip(_PUNCTUATION))
        # A clause of its own after one with a verb that is no plural noun in disguise ("The
        # flowering plants Ecballium and Elatostema are in the same family"), saying nothing of
        # the two together.
        if _CLAUSE.match(right) and form != "present" and not _BETWEEN_THEM.search(right):
            return [f"{left}.", f"{_cap(right)}."]
        # One subject, two predicates: the second begins with a verb of the first one's form.
        head = right.split(maxsplit=1)
        second = verb_form(head[0]) if len(head) > 1 else None
        if second is not None and second in ("auxiliary", form):
            return [f"{left}.", f"{' '.join(words[:first])} {right}."]
    return None


def _inside_quotes(left: str) -> bool:
    """Whether a quotation opened in `left` is still open at its end."""
    return left.count('"') % 2 == 1 or left.count("\u201c") > left.count("\u201d")


def _first_verb(words: list[str]) -> int | None:
    """The index of the first word after the first that may be a finite verb (`verb_form`), where
    at least one word follows it (a predicate has an object or complement); None where there is
    none, or where it is a relative clause's ("The woman who portrayed Corliss Archer in the film
    Kiss and Tell was ...": the main verb comes after the "and")."""
    for i, w in enumerate(words[1:-1], start=1):
        if verb_form(w.strip(_PUNCTUATION)) is not None:
            return None if words[i - 1].lower() in _RELATIVE else i
    return None


# Words that end a predicate's noun phrase ("breeds | of dog", "documentaries | about war").
_NP_END = re.compile(
    r"\s+(?=(?:of|in|on|at|about|from|for|with|by|that|who|which|based|located|born|known|since)\b)"
)
_NOT_NOUN = frozenset(
    (
        *("located", "based", "born", "known", "considered", "present", "active", "famous"),
        *("popular", "made", "found", "situated", "in", "on", "at", "of", "from", "for", "with"),
        *("by", "about", "into", "near"),
    )
)


def singular_predicate(rest: str) -> str:
    """A plural noun predicate made singular for one subject ("professional tennis players" ->
    "a professional tennis player", "breeds of dog" -> "a breed of dog"), so that "A is
    professional tennis players." does not read as ungrammatical nonsense to the NLI model (on
    DEV it called such claims contradicted); anything else ("American", "located in Michigan",
    "from the United States") is returned as it is."""
    head = _NP_END.split(rest, maxsplit=1)[0]
    tail = rest[len(head) :]  # " of dog", with the space before it; "" when the phrase is all
    words = head.split()
    if not words or len(words) > 5 or words[0].lower() in ("a", "an", "the", "not", "all", "both"):
        return rest
    if words[0].lower() == "considered" and len(words) > 1:
        # "considered rock bands" -> "a rock band": what a passage states ("OK Go is an American
        # rock band"), which the NLI model read as contradicting "is considered a rock band".
        return singular_predicate(rest.split(None, 1)[1])
    if words[0].lower() in _NOT_NOUN or "as" in words:  # "described as well-respected colleagues"
        return rest
    noun = words[-1]
    if not re.fullmatch(r"[a-z][a-z-]*[a-z]s", noun) or noun.endswith(("ss", "us", "is", "ics")):
        return rest
    if noun.endswith("ies") and len(noun) > 4:
        one = noun[:-3] + "y"
    elif noun.endswith(("ches", "shes", "xes", "sses")):
        one = noun[:-2]
    else:
        one = noun[:-1]
    phrase = " ".join([*words[:-1], one])
    article = "an" if phrase[:1].lower() in "aeiou" else "a"
    return f"{article} {phrase}{tail}"


def _cap(s: str) -> str:
    s = s.strip().strip(",")
    return s[:1].upper() + s[1:]
