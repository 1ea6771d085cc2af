"""What the user reads: the answer with a citation marker on each sentence the diagnosis supports,
and, when the final answer is still unsupported, what `answer_policy` says to do about it.

- `annotate`: the answer, its unsupported sentences marked, and one plain sentence
  saying the sources do not support it (or do not answer the question, for IE);
- `abstain`: a short statement that the sources do not answer this, with what was found;
- `abstain_unanswered` (the default): abstain where the diagnosis found that the sources do not
  answer the question (failure IE, or a failed answer whose evidence the answerability model
  gives P(answerable) below `server.unanswered_below`), annotate where they do and the answer is not what
  they say: a question outside the corpus gets the statement, not a made-up answer with a note;
- `off`: the generated text as it is (citations still marked where supported, unless citations
  are off).

Whatever the policy but `off`, an answer whose evidence holds incompatible answers to the question
(diagnosis.conflict) reads as both sides, each with its passages ("The sources disagree: [1] and
[2] say ...; [3] says ..."), in place of one side stated as fact; `server.conflict_majority` adds
which side more trusted sources take, where every passage's source has a trust level (a document's
"trust" at ingest), else which side more of those passages take.

Two repair actions decide what is read themselves, whatever the policy: `abstain` (the statement
that the sources do not answer) and `present_conflict` (both sides, as above). One voice speaks:
`Presented.abstained_by` and `Presented.conflict_by` say whose it is, the repair's or the answer
policy's.

An answer the diagnosis did not judge (its question or text is not English) goes through the
answer policy like any other, which decides on what is known of it, that nothing was checked
(`Reading.unjudged`): `abstain` withholds it, `annotate` and `abstain_unanswered` keep it with one
plain sentence saying it was not checked, `off` shows it as generated. It is never presented as
consistent with the sources.

In claim mode the label is the gated one (diagnosis.final_label: "Unverified" where the evidence
is insufficient) in place of the generator's.

Citations are numbered as the evidence list of the reply ([1] is its first passage). A sentence is
supported when every atomic claim the diagnosis checked for it is entailed; it cites the passages
that entailed them (the joint premise cites the passages it joined).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ragmend.diagnosis.compound import decompose, unprefixed
from ragmend.diagnosis.hypotheses import CITATION_MARK, is_abstention, split_claims
from ragmend.diagnosis.spans import is_bare
from ragmend.diagnosis.types import ABSTAIN_LABEL, Diagnosis, EvidenceConflict, FailureType, HypothesisVerdict
from ragmend.settings import UNANSWERED_BELOW, AnswerPolicy, ServerSettings

UNSUPPORTED_MARK = "[unsupported]"
NOT_SUPPORTED = "Note: the sources found do not support this answer."
NOT_ANSWERED = "Note: the sources found do not answer this question."
NOT_VERIFIED = "the sources found do not verify this claim."
UNSURE = "Note: the check is not sure the sources found support this answer"
MISSED = "Note: the sources found may answer this question."  # under a generator's missed answer
NOT_CHECKED = "Note: this answer was not checked against the sources: the checks read English only."
WITHHELD = (
    "This answer is not shown: it could not be checked against the sources (the checks read English only)."
)
ABSTENTION_TEXT = "The sources do not answer this question."
DISAGREE = "The sources disagree:"
ORDINALS = ("first", "second", "third", "fourth")
CORRECTION = "[Correction] "  # leads what a live stream sends after an answer a repair replaced
WITHDRAWN = "The answer above is withdrawn. "  # the statement in its place says why
REPLACED = "The answer above is replaced, as "
# Why a repair's answer replaced the one streamed above it: the first answer's failure type.
REPLACED_BECAUSE: dict[FailureType, str] = {
    "WR": "the sources found do not support it",
    "IE": "the sources found do not answer the question",
    "WP": "the corpus states otherwise",
    "LEM": "the sources decide the claim the other way",
}
MAX_SENTENCES = 32  # a long response is cited sentence by sentence up to here, then left as it is
# What a repair action decided the user reads, in place of an answer: its abstention, or both sides
# of the evidence's conflict.
RepairDecision = Literal["abstained", "conflict"]
Speaker = Literal["repair", "answer_policy"]
# What the answer policy does with an answer the diagnosis could not judge.
Unjudged = Literal["as_generated", "caveat", "withhold"]


@dataclass(frozen=True)
class Reading:
    """How a final answer is shown: server.answer_policy, server.citations and
    server.unanswered_below (`of`), one value so every caller presents alike."""

    policy: AnswerPolicy = "abstain_unanswered"
    citations: bool = True
    unanswered_below: float = UNANSWERED_BELOW
    conflict_majority: bool = False

    @classmethod
    def of(cls, server: ServerSettings) -> Reading:
        return cls(server.answer_policy, server.citations, server.unanswered_below, server.conflict_majority)

    def abstains(self, failure: FailureType, p_answerable: float | None) -> bool:
        """Whether a judged final answer with this failure type, its evidence given P(answerable)
        by the answerability model, reads as the abstention."""
        if failure == "NoFailure":
            return False
        unanswered = failure == "IE" or (p_answerable is not None and p_answerable < self.unanswered_below)
        return self.policy == "abstain" or (self.policy == "abstain_unanswered" and unanswered)

    def unjudged(self) -> Unjudged:
        """What a final answer the diagnosis could not judge reads as. Nothing says it is
        unsupported, nor that the sources do not answer: `abstain`, which shows no answer the
        check does not stand behind, withholds it; `annotate` and `abstain_unanswered` keep it
        with the caveat that it was not checked; `off` shows it as generated."""
        if self.policy == "off":
            return "as_generated"
        return "withhold" if self.policy == "abstain" else "caveat"


@dataclass(frozen=True)
class CitedSentence:
    text: str
    passages: tuple[int, ...]  # 1-based numbers in the reply's evidence list
    supported: bool | None  # None: the diagnosis did not judge it (past max_claims, an abstention)


@dataclass(frozen=True, kw_only=True)
class Presented:
    text: str  # what the user reads
    sentences: tuple[CitedSentence, ...]
    # "annotate" / "abstain" when the final answer failed; "conflict" when it reads as both sides
    # of a conflict in its evidence; "not_judged" / "withheld" when the diagnosis could not judge
    # it (kept with the caveat, or not shown); else None.
    policy_applied: str | None
    # annotate: the plain sentence saying the sources do not support it; not_judged: the one
    # saying it was not checked.
    note: str | None = None
    # Who said the sources do not answer: the repair policy's abstain action, or answer_policy
    # (abstain) on a final answer still unsupported; None: no abstention.
    abstained_by: Speaker | None = None
    # Who presented both sides of a conflict: the repair policy's present_conflict action, or the
    # answer policy's reading of a conflict; None: not presented.
    conflict_by: Speaker | None = None


def cite(
    response: str,
    diagnosis: Diagnosis,
    evidence_ids: Sequence[str],
    query: str = "",
) -> tuple[CitedSentence, ...]:
    """Each sentence of the response with the passages supporting it, by the diagnosis' claims
    (`query`: the question the claims were split against, as the diagnoser splits them)."""
    if diagnosis.mode != "qa" or is_abstention(response):
        return ()
    claims = {v.hypothesis: v for v in diagnosis.e_r.hypotheses}
    number = {pid: n for n, pid in enumerate(evidence_ids, start=1)}
    sentences = split_claims(response, MAX_SENTENCES, keep=query)
    hypotheses = diagnosis.e_r.hypotheses
    if len(sentences) == 1 and hypotheses and (len(hypotheses) == 1 or is_bare(response)):
        # A bare answer is judged as the question's statement (a yes or no, as the claims that
        # statement joins): those verdicts are the sentence's.
        return (_cited(sentences[0], hypotheses, number),)
    out = []
    for sentence in sentences:
        atoms = [claims.get(atom) for atom in decompose(sentence)]
        if None in atoms:  # judged whole: its parts did not fit in the claim limit
            atoms = [claims.get(unprefixed(sentence))]
        found = [v for v in atoms if v is not None]
        if len(found) < len(atoms) or not found:
            out.append(CitedSentence(sentence, (), None))
        else:
            out.append(_cited(sentence, found, number))
    return tuple(out)


def _cited(sentence: str, verdicts: Sequence[HypothesisVerdict], number: dict[str, int]) -> CitedSentence:
    supported = all(v.state == "entail" for v in verdicts)
    cited: list[int] = []
    if supported:
        for v in verdicts:
            best = next((s for s in v.scores if s.passage == v.best_passage), None)
            joined = best.joined if best is not None and best.joined else (v.best_passage,)
            cited += [number[pid] for pid in joined if pid in number]
    return CitedSentence(sentence, tuple(sorted(set(cited))), supported)


def present(
    response: str,
    diagnosis: Diagnosis | None,
    evidence: Sequence[tuple[str, str]],
    reading: Reading = Reading(),
    query: str = "",
    decided: RepairDecision | None = None,
) -> Presented:
    """The text the user reads for a final answer and its diagnosis, as `reading` says (`evidence`:
    each passage's id and title, in the reply's order; `query`: the question the answer was
    diagnosed against; `decided`: what a repair action chose to say instead: "abstained", the
    answer is its statement; "conflict", both sides of the conflict `diagnosis` found). What the
    repair chose is never annotated or abstained over again: one voice says it."""
    if diagnosis is None:
        return Presented(text=response, sentences=(), policy_applied=None)
    if decided == "conflict" and diagnosis.conflict is not None:
        return _conflict(response, diagnosis, evidence=evidence, reading=reading, query=query, by="repair")
    if decided == "abstained":
        if diagnosis.mode == "claim":
            return Presented(
                text=f"{ABSTAIN_LABEL}: {NOT_VERIFIED}",
                sentences=(),
                policy_applied="abstain",
                abstained_by="repair",
            )
        return Presented(
            text=ABSTENTION_TEXT + _found(evidence),
            sentences=(),
            policy_applied="abstain",
            abstained_by="repair",
        )
    if not diagnosis.judged:
        # Nothing was checked, so nothing is cited or marked; the policy says what is read.
        shown = reading.unjudged()
        if shown == "withhold":
            return Presented(text=WITHHELD, sentences=(), policy_applied="withheld")
        if shown == "caveat":
            return Presented(
                text=f"{response} {NOT_CHECKED}".strip(),
                sentences=(),
                policy_applied="not_judged",
                note=NOT_CHECKED,
            )
        return Presented(text=response, sentences=(), policy_applied=None)
    if diagnosis.mode == "claim":
        # The gated label leads; the generator's reason follows its own label.
        label = diagnosis.final_label
        if label and diagnosis.label and label != diagnosis.label:
            return Presented(text=f"{label}: {NOT_VERIFIED}", sentences=(), policy_applied="gated")
        return Presented(text=response, sentences=(), policy_applied=None)
    if diagnosis.conflict is not None and reading.policy != "off":
        return _conflict(
            response, diagnosis, evidence=evidence, reading=reading, query=query, by="answer_policy"
        )
    if diagnosis.decided_by == "missed_answer" and reading.policy != "off":
        # The generator's "I don't know." stays, and the passages that may answer are named: the
        # user is not told that the sources do not answer.
        note = MISSED + _found(evidence)
        return Presented(text=f"{response} {note}", sentences=(), policy_applied="marked", note=note)
    sentences = cite(response, diagnosis, [pid for pid, _ in evidence], query=query)
    # An uncertain failure keeps its answer, marked, whatever the policy but off.
    uncertain = diagnosis.grade == "uncertain" and reading.policy != "off"
    if not uncertain and reading.abstains(diagnosis.failure, diagnosis.e_q.support):
        return Presented(
            text=ABSTENTION_TEXT + _found(evidence),
            sentences=sentences,
            policy_applied="abstain",
            abstained_by="answer_policy",
        )
    annotate = uncertain or (diagnosis.failed and reading.policy in ("annotate", "abstain_unanswered"))
    citations = reading.citations
    if not citations and not annotate:
        return Presented(text=response, sentences=sentences, policy_applied=None)
    text = " ".join(_marked(s, citations, annotate) for s in sentences) if sentences else response
    if uncertain:
        note = unsure(diagnosis)
        return Presented(
            text=f"{text} {note}".strip(), sentences=sentences, policy_applied="marked", note=note
        )
    if annotate:
        note = NOT_ANSWERED if diagnosis.failure == "IE" else NOT_SUPPORTED
        return Presented(
            text=f"{text} {note}".strip(), sentences=sentences, policy_applied="annotate", note=note
        )
    return Presented(text=text, sentences=sentences, policy_applied=None)


def unsure(diagnosis: Diagnosis) -> str:
    """The note under an answer an uncertain failure leaves in place: that the check doubts its
    support, and how sure it is."""
    p = diagnosis.verdict.p_unsupported if diagnosis.verdict is not None else None
    how = f" (it puts the chance that it is unsupported at {round(100 * p)}%)" if p is not None else ""
    return f"{UNSURE}{how}."


def _conflict(
    response: str,
    diagnosis: Diagnosis,
    evidence: Sequence[tuple[str, str]],
    reading: Reading,
    query: str,
    by: Speaker,
) -> Presented:
    """Both sides of the conflict `diagnosis` found, in place of the answer, spoken by `by`."""
    assert diagnosis.conflict is not None
    sentences = cite(response, diagnosis, [pid for pid, _ in evidence], query=query)
    numbers = {pid: n for n, (pid, _) in enumerate(evidence, start=1)}
    said = both_sides(diagnosis.conflict, numbers, reading.conflict_majority)
    return Presented(text=said, sentences=sentences, policy_applied="conflict", conflict_by=by)


def both_sides(conflict: EvidenceConflict, numbers: dict[str, int], majority: bool) -> str:
    """What each side of a conflict says, with its passages' citations (`numbers`: a passage id's
    number in the reply's evidence), and, with `majority`, which side more of them take."""
    said = []
    for side in conflict.sides:
        cited = sorted(numbers[p] for p in side.passages if p in numbers)
        markers = " and ".join(f"[{n}]" for n in cited) or "some of the sources"
        verb = "say" if len(cited) > 1 else "says"
        said.append(f"{markers} {verb}: {side.says.strip().rstrip('.')}")
    text = f"{DISAGREE} " + "; ".join(said) + "."
    return text + (_majority(conflict) if majority else "")


def _majority(conflict: EvidenceConflict) -> str:
    """Which side more trusted sources take, where every passage's source has a trust level;
    else which side more passages take; nothing where the sides weigh the same."""
    trust = [side.trust for side in conflict.sides]
    if all(t is not None for t in trust):
        weights = [float(t or 0.0) for t in trust]
        if len(set(weights)) == 1:
            return ""
        most = max(range(len(weights)), key=weights.__getitem__)
        others = " against ".join(f"{w:g}" for i, w in enumerate(weights) if i != most)
        side = ORDINALS[most]
        return f" More trusted sources take the {side} side (trust {weights[most]:g} against {others})."
    sizes = [len(side.passages) for side in conflict.sides]
    if len(set(sizes)) == 1:
        return ""
    most = max(range(len(sizes)), key=sizes.__getitem__)
    return f" More of them ({sizes[most]} of {sum(sizes)}) take the {ORDINALS[most]} side."


def correction(answer: str, replaced_because: FailureType | None = None) -> str:
    """A live stream's correction of the answer streamed above it, led by one line saying what
    changed and why: a repair's answer (`replaced_because`: the first answer's failure) names the
    failure; a statement in the answer's place (the abstention, both sides of a conflict, the
    withheld answer's) says why itself."""
    if replaced_because in REPLACED_BECAUSE:
        return f"{CORRECTION}{REPLACED}{REPLACED_BECAUSE[replaced_because]}: {answer}"
    return f"{CORRECTION}{WITHDRAWN}{answer}"


def plain_text(text: str) -> str:
    """An answer as ragmend presented it, back to what was said: its citation markers, unsupported
    marks and notes removed. Chat clients send ragmend's replies back as the conversation's
    assistant turns, and the marks must not reach what reads them: spaCy's recogniser finds no
    entity in '"The Conversation".[1]', and the condensing prompt would copy them. A streamed
    reply's correction replaces what came before it, and an abstention's list of what was found
    names passages, not an answer."""
    if CORRECTION in text:
        text = text.rsplit(CORRECTION, 1)[1].removeprefix(WITHDRAWN)
        if text.startswith(REPLACED):
            text = text.partition(": ")[2]
    text = text.split(MISSED, 1)[0]
    for statement in (ABSTENTION_TEXT, WITHHELD):
        if text.lstrip().startswith(statement):
            return statement
    for note in (NOT_SUPPORTED, NOT_ANSWERED, NOT_CHECKED):
        text = text.replace(note, " ")
    text = CITATION_MARK.sub("", text.replace(UNSUPPORTED_MARK, " "))
    # A mark removed before a full stop leaves "Nevada ." behind.
    return re.sub(r"\s+([.,;:!?])", r"\1", " ".join(text.split()))


def _found(evidence: Sequence[tuple[str, str]], most: int = 5) -> str:
    """' What was found: [1] Title, [3] Other title.' (each title once, numbered as in evidence)."""
    first: dict[str, int] = {}
    for n, (_, title) in enumerate(evidence, start=1):
        if title and title not in first:
            first[title] = n
    if not first:
        return ""
    listed = ", ".join(f"[{n}] {title}" for title, n in list(first.items())[:most])
    return f" What was found: {listed}."


def _marked(s: CitedSentence, citations: bool, mark_unsupported: bool) -> str:
    if s.supported and citations and s.passages:
        return s.text + "".join(f"[{n}]" for n in s.passages)
    if s.supported is False and mark_unsupported:
        return f"{s.text} {UNSUPPORTED_MARK}"
    return s.text
