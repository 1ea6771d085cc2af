"""Relational triples and the dependency-parse extractor (the offline default).

`SpacyTripleExtractor` reads subject-relation-object triples off spaCy's dependency parse:

- clauses: nsubj/nsubjpass -> verb -> dobj/attr/oprd (relation: the verb's lemma, with its
  particle: "set_up"), and prepositional objects (relation: lemma + preposition, "bear_in");
- copulas: "X is a Y" -> (X, be, a Y), "X is in Y" -> (X, be_in, Y);
- passives with an agent are turned active, so both voices give one triple:
  "Jaws was directed by Spielberg" -> (Spielberg, direct, Jaws);
- appositions: "X, a Y," -> (X, be, a Y);
- conjunctions of subjects, objects and verbs ("X was born in A and died in B");
- relative clauses and participles: "Curie, who was born in Warsaw" and "a film directed by Y"
  attach to the noun they modify (and "X is a film directed by Y" to X).

Arguments are the entity span or noun chunk around the argument's head word (with compounds and
one "of" phrase: "the capital of France"), never a whole relative clause. Negation ("not",
"never", "n't", a "no" determiner on the object) is kept in `negated`, numbers and dates
(CARDINAL, DATE, QUANTITY, MONEY, PERCENT entities and number-like words) in `numbers`, and
verbatim in the object text. Personal pronoun subjects ("He was born in...") are resolved to the
latest named main-clause subject of the same text (a person for he/she); unresolved ones are
dropped. Hyphenated words are merged into one token before parsing ("co-founder").
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from ragmend.kg.phrases import normalise_phrase, normalise_relation

# Bumped whenever the rules below change what is extracted, so a store re-extracts its documents.
RULES_VERSION = 1


@dataclass(frozen=True, kw_only=True)
class Triple:
    subject: str
    relation: str  # lemma-normalised, lower case, words joined by "_": "bear_in"
    object: str
    negated: bool = False
    numbers: tuple[str, ...] = ()  # numbers and dates of the object, verbatim
    sentence: str = ""
    # Where it came from: the store sets the chunk (node) id; empty for a response's triples.
    source: str = ""
    # Character offsets into the text given to the extractor; (-1, -1) where unknown. A resolved
    # pronoun subject points at its antecedent.
    subject_span: tuple[int, int] = (-1, -1)
    object_span: tuple[int, int] = (-1, -1)

    @property
    def spo(self) -> tuple[str, str, str]:
        return (self.subject, self.relation, self.object)

    @property
    def key(self) -> tuple[str, str, str, bool]:
        """What makes two triples the same statement."""
        return (normalise_phrase(self.subject), self.relation, normalise_phrase(self.object), self.negated)


class TripleExtractor(Protocol):
    @property
    def name(self) -> str:
        """Recorded by the store: documents extracted by another extractor are extracted again."""
        ...

    def extract(self, texts: list[str]) -> list[list[Triple]]:
        """One list of triples per text, in order."""
        ...


_SUBJECT_DEPS = frozenset({"nsubj", "nsubjpass"})
_OBJECT_DEPS = frozenset({"dobj", "attr", "oprd"})
# Clauses without a subject of their own share their head verb's: "...and died in B",
# "went on to become a teacher", "Born in Warsaw, she...".
_INHERITS_SUBJECT = frozenset({"conj", "xcomp", "advcl"})
_NUMERIC_ENTS = frozenset({"CARDINAL", "DATE", "QUANTITY", "MONEY", "PERCENT"})
_NEGATORS = frozenset({"not", "n't", "never"})
_RELATIVE = frozenset({"who", "whom", "which", "that", "whose"})
# Pronouns resolved to an earlier subject, by the kind of antecedent they may take.
_PERSONAL = {"he": "person", "she": "person", "him": "person", "her": "person", "it": "thing"}
_PERSONAL_ANY = frozenset({"they", "them"})
# Arguments that name nothing on their own; triples with them are dropped.
_VACUOUS = frozenset({"i", "you", "we", "me", "us", "this", "these", "those", "there", "what", "itself"})
_LEFT_MODIFIERS = frozenset({"compound", "amod", "nummod", "det", "poss", "nmod", "quantmod"})
_PERSON_ENTS = frozenset({"PERSON"})
# Prepositional phrases that structure the text rather than state a relation.
_DISCOURSE = frozenset(
    {("for", "example"), ("for", "instance"), ("in", "addition"), ("in", "fact"), ("of", "course")}
    | {("in", "particular"), ("in", "general"), ("at", "least"), ("in", "total")}
)


@dataclass(frozen=True, kw_only=True)
class _Raw:
    """A triple before its arguments are turned into text (spaCy Spans / Tokens inside)."""

    subject: Any
    relation: str
    object: Any
    negated: bool
    sentence: str
    # False for a passive turned active: the grammatical subject (resolved like any subject) is
    # then the object, and the agent the subject.
    active: bool = True
    # From the sentence's main clause (its root verb or a conjunct of it): pronoun antecedents.
    main: bool = False


class SpacyTripleExtractor:
    """Triples from spaCy's dependency parse; `nlp` is a loaded pipeline (parser, NER, lemmatizer)."""

    def __init__(self, nlp: Any, max_triples_per_text: int = 32, batch_size: int = 64):
        self.nlp = nlp
        self.max_triples_per_text = max_triples_per_text
        self.batch_size = batch_size
        meta = getattr(nlp, "meta", {}) or {}
        model = f"{meta.get('lang', 'xx')}_{meta.get('name', 'pipeline')}-{meta.get('version', '?')}"
        self.name = f"spacy:{model}:rules-{RULES_VERSION}"

    def extract(self, texts: list[str]) -> list[list[Triple]]:
        return [self.from_doc(doc) for doc in self.parse(texts)]

    def parse(self, texts: list[str]) -> Iterator[Any]:
        """Parsed docs, hyphenated words kept whole (see _join_hyphens)."""
        tokenized = (_join_hyphens(self.nlp.make_doc(t)) for t in texts)
        return self.nlp.pipe(tokenized, batch_size=self.batch_size)

    def from_doc(self, doc: Any) -> list[Triple]:
        """The triples of one parsed text, in reading order, without duplicates."""
        args = _Arguments(doc)
        resolver = _PronounResolver(args)
        out: list[Triple] = []
        seen: set[tuple[str, str, str, bool]] = set()
        for raw in _raw_triples(doc):
            if raw.active:
                subject, obj = resolver.subject(raw.subject, raw.main), args.object(raw.object)
            else:
                obj, subject = resolver.subject(raw.object, raw.main), args.object(raw.subject)
            if subject is None or obj is None:
                continue
            t = Triple(
                subject=subject.text,
                relation=raw.relation,
                object=obj.text,
                negated=raw.negated,
                numbers=args.numbers(obj),
                sentence=raw.sentence,
                subject_span=(subject.start_char, subject.end_char),
                object_span=(obj.start_char, obj.end_char),
            )
            key = t.key
            if key in seen or key[0] == key[2] or not key[0] or not key[2]:
                continue
            seen.add(key)
            out.append(t)
            if len(out) >= self.max_triples_per_text:
                break
        return out


def _join_hyphens(doc: Any) -> Any:
    """One token for "co-founder", "not-for-profit", "Jay-Z".

    The tokenizer splits hyphens between letters and en_core_web_sm then parses "the co -
    founder" as three objects ("the co", "-", "founder of X"). Merged before the tagger and
    parser run, the word is one noun. Only letter-hyphen-letter with no spaces; "1990-91" and
    "Paris - Berlin" stay split.
    """
    runs: list[tuple[int, int]] = []
    i = 1
    while i < len(doc) - 1:
        if _hyphen_join(doc, i):
            start, end = i - 1, i + 2
            while end < len(doc) - 1 and _hyphen_join(doc, end):
                end += 2
            runs.append((start, end))
            i = end
        else:
            i += 1
    if runs:
        with doc.retokenize() as retokenizer:
            for start, end in runs:
                retokenizer.merge(doc[start:end])
    return doc


def _hyphen_join(doc: Any, i: int) -> bool:
    left, mid, right = doc[i - 1], doc[i], doc[i + 1]
    joined = not left.whitespace_ and not mid.whitespace_
    return mid.text == "-" and joined and left.is_alpha and right.is_alpha


# -- the parse rules ---------------------------------------------------------------------------


def _raw_triples(doc: Any) -> Iterator[_Raw]:
    for tok in doc:
        if tok.dep_ == "appos" and tok.head.pos_ in ("NOUN", "PROPN") and _describes(tok):
            yield _Raw(
                subject=tok.head, relation="be", object=tok, negated=False, sentence=tok.sent.text.strip()
            )
        elif tok.pos_ in ("VERB", "AUX") and tok.dep_ not in ("aux", "auxpass"):
            yield from _clause(tok)


def _clause(verb: Any) -> Iterator[_Raw]:
    subjects = _subjects(verb)
    if not subjects:
        return
    negated = any(c.dep_ == "neg" or (c.lower_ in _NEGATORS and c.dep_ == "advmod") for c in verb.children)
    particles = "".join("_" + c.lower_ for c in verb.children if c.dep_ == "prt")
    relation = normalise_relation(verb.lemma_) + particles
    sentence = verb.sent.text.strip()
    main = verb.dep_ == "ROOT" or (verb.dep_ == "conj" and verb.head.dep_ == "ROOT")
    agents = [a for c in verb.children if c.dep_ == "agent" for a in _pobjs(c)]
    # A passive with an agent is stated actively: the agent acts on the grammatical subject.
    for agent in agents:
        for s in subjects:
            yield _Raw(
                subject=agent,
                relation=relation,
                object=s,
                negated=negated,
                sentence=sentence,
                active=False,
                main=main,
            )
    for c in verb.children:
        if c.dep_ in _OBJECT_DEPS:
            objects = [_relative_target(verb, o) for o in _with_conjuncts(c)]
            rel = relation
        elif c.dep_ == "prep":
            objects = [_relative_target(verb, o) for o in _pobjs(c) if (c.lower_, o.lower_) not in _DISCOURSE]
            rel = f"{relation}_{c.lower_}"
        else:
            continue
        for o in objects:
            if o is None:
                continue
            for s in subjects:
                yield _Raw(
                    subject=s,
                    relation=rel,
                    object=o,
                    negated=negated or _has_no(o),
                    sentence=sentence,
                    main=main,
                )


def _describes(appos: Any) -> bool:
    """Whether an apposition says what its noun is: "X, a Y" and "X, the Y of Z" do.

    Name lists ("Grand Rapids, Michigan", "IATA: BGI", "(GAIA)") are appositions to the parser
    too, and read as "X is Y" they are mostly wrong.
    """
    articles = ("a", "an", "the")
    return appos.pos_ == "NOUN" or any(c.dep_ == "det" and c.lower_ in articles for c in appos.children)


def _subjects(verb: Any, depth: int = 0) -> list[Any]:
    own = [c for c in verb.children if c.dep_ in _SUBJECT_DEPS]
    if own:
        found = [_relative_target(verb, s) for c in own for s in _with_conjuncts(c)]
        return [s for s in found if s is not None]
    if depth < 8 and verb.dep_ in _INHERITS_SUBJECT and verb.head.pos_ in ("VERB", "AUX"):
        return _subjects(verb.head, depth + 1)
    # "a film directed by Y", "a company producing cars": the participle's noun is its subject.
    if verb.dep_ == "acl" and verb.tag_ in ("VBN", "VBG") and verb.head.pos_ in ("NOUN", "PROPN"):
        return _referents(verb.head)
    return []


def _relative_target(verb: Any, tok: Any) -> Any | None:
    """A relative pronoun stands for the noun its clause modifies; elsewhere it names nothing."""
    if tok.lower_ not in _RELATIVE or tok.tag_ not in ("WDT", "WP", "WP$", "IN", "DT"):
        return tok
    if verb.dep_ == "relcl":
        return _referents(verb.head)[0]
    return None


def _referents(noun: Any) -> list[Any]:
    """What a modified noun refers to: in "X is a film directed by Y" the film is X."""
    if noun.dep_ == "attr" and noun.head.lemma_ == "be":
        subjects = [s for c in noun.head.children if c.dep_ in _SUBJECT_DEPS for s in _with_conjuncts(c)]
        if subjects:
            return subjects
    return [noun]


def _pobjs(prep: Any) -> list[Any]:
    return [o for c in prep.children if c.dep_ == "pobj" for o in _with_conjuncts(c)]


def _with_conjuncts(tok: Any) -> list[Any]:
    return [tok, *(c for c in tok.conjuncts if c.i > tok.i)]


def _has_no(tok: Any) -> bool:
    return any(c.dep_ == "det" and c.lower_ == "no" for c in tok.children)


# -- arguments ---------------------------------------------------------------------------------


class _Arguments:
    """Turns argument head tokens into spans of one parsed text."""

    def __init__(self, doc: Any):
        self.doc = doc
        self._chunk = {t.i: c for c in doc.noun_chunks for t in c}
        self._ent = {t.i: e for e in doc.ents for t in e}

    def span(self, tok: Any, of_phrase: bool = True) -> Any:
        start, end = tok.i, tok.i + 1
        ent, chunk = self._ent.get(tok.i), self._chunk.get(tok.i)
        for s in (ent, chunk):
            if s is not None:
                start, end = min(start, s.start), max(end, s.end)
        if ent is None and chunk is None:
            for c in tok.lefts:
                if c.dep_ in _LEFT_MODIFIERS:
                    start = min(start, c.left_edge.i)
        if of_phrase:
            # "the capital of France", "a member of Queen": the "of" phrase is part of the name.
            for c in tok.rights:
                pobj = next((g for g in c.children if g.dep_ == "pobj"), None)
                if c.dep_ == "prep" and c.lower_ == "of" and c.i == end and pobj is not None:
                    end = max(end, self.span(pobj, of_phrase=False).end)
        while end > start + 1 and (self.doc[end - 1].is_punct or self.doc[end - 1].is_space):
            end -= 1
        while start < end - 1 and (self.doc[start].is_punct or self.doc[start].is_space):
            start += 1
        return self.doc[start:end]

    def object(self, tok: Any) -> Any | None:
        if tok.pos_ == "PRON" or tok.lower_ in _VACUOUS or tok.is_punct:
            return None
        return self.span(tok)

    def numbers(self, span: Any) -> tuple[str, ...]:
        found: list[str] = []
        covered: set[int] = set()
        for e in span.ents:
            if e.label_ in _NUMERIC_ENTS:
                found.append(e.text)
                covered.update(range(e.start, e.end))
        found.extend(t.text for t in span if t.like_num and t.i not in covered)
        return tuple(found)

    def kind(self, span: Any) -> str:
        root = span.root
        if root.ent_type_ in _PERSON_ENTS:
            return "person"
        return "thing" if root.ent_type_ or root.pos_ == "NOUN" else "unknown"


class _PronounResolver:
    """The latest named main-clause subject of the text, by kind, stands in for a later pronoun.

    Main clauses only: in "X is the airport of Barbados, located in Y. It is..." the "It" is X,
    the topic, not Barbados, the subject the parser gives the participle. Subjects of other
    clauses are used only while no main-clause subject of their kind has been seen.
    """

    def __init__(self, args: _Arguments):
        self.args = args
        self._latest: dict[str, Any] = {}

    def subject(self, tok: Any, main: bool) -> Any | None:
        lower = tok.lower_
        if tok.pos_ == "PRON" and (lower in _PERSONAL or lower in _PERSONAL_ANY):
            return self._latest.get(_PERSONAL.get(lower, "any"))
        if tok.pos_ == "PRON" or lower in _VACUOUS or lower in _RELATIVE or tok.is_punct:
            return None
        span = self.args.span(tok)
        kind = self.args.kind(span)
        # A proper name NER missed may be a person or a thing; let either pronoun find it.
        kinds = ("any", kind) if kind != "unknown" else ("any", "person", "thing")
        for k in kinds:
            if main and (k == "any" or kind != "unknown"):
                self._latest[k] = span
            else:
                self._latest.setdefault(k, span)
        return span
