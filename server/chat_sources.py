"""What a chat UI shows beside a reply's text: the passages it cites as sources, and one line on
how the diagnosis judged it, in the forms Open WebUI renders (its citation chips and source panel,
and the status line above a message). /v1/answer carries the same line as its `status`.

A chat reply numbers its citations as its own `sources`: the passages its answer cites, in the
order they are first cited, so `[1]` in the message is the first source (Open WebUI makes `[n]`
a chip of the n-th source). The `ragmend` extension keeps the native numbering of `evidence`.
A streamed reply sends each source and the status as an `event` of a chunk (Open WebUI's form
for a backend's events); a whole completion carries `sources` at its top level. Clients that know
neither ignore them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ragmend.server.openai_schemas import ChatSource, ChatStatus, SourceMeta, SourceRef
from ragmend.server.schemas import AnswerResponse, Passage, RepairTrace

# One citation: "[2]" or "[1, 3]" (the numbers of `evidence`).
MARKER = re.compile(r"\[(\d+(?:,\s*\d+)*)\]")


@dataclass(frozen=True)
class CitedSources:
    """The passages a presented answer cites, numbered 1.. in the order they are first cited."""

    passages: tuple[Passage, ...]
    numbers: dict[int, int]  # evidence number -> the source's number

    @classmethod
    def of(cls, reply: AnswerResponse) -> CitedSources:
        order: dict[int, int] = {}
        for marker in MARKER.finditer(reply.answer):
            for n in _numbers(marker):
                if 1 <= n <= len(reply.evidence) and n not in order:
                    order[n] = len(order) + 1
        return cls(tuple(reply.evidence[n - 1] for n in order), order)

    def renumber(self, text: str) -> str:
        """`text` with each evidence number replaced by its source's number."""

        def numbered(marker: re.Match[str]) -> str:
            new = [str(self.numbers[n]) if n in self.numbers else str(n) for n in _numbers(marker)]
            return "[" + ", ".join(new) + "]"

        return MARKER.sub(numbered, text)

    def sources(self) -> list[ChatSource]:
        """Each cited passage in Open WebUI's source form: its title as the name, the passage as
        the document, its id as the key that keeps two passages of one title apart, and where it
        came from (collection, document, trust level)."""
        return [
            ChatSource(
                source=SourceRef(id=p.id, name=p.title or p.doc_id),
                document=[p.text],
                metadata=[
                    SourceMeta(
                        source=p.id,
                        name=p.title or p.doc_id,
                        doc_id=p.doc_id,
                        collection=p.collection,
                        trust=p.trust,
                    )
                ],
            )
            for p in self.passages
        ]


def _numbers(marker: re.Match[str]) -> list[int]:
    return [int(n) for n in marker.group(1).split(",")]


def status(reply: AnswerResponse) -> ChatStatus | None:
    """The status line of a reply (`status_line`) in Open WebUI's form; None without a diagnosis."""
    line = status_line(reply)
    return None if line is None else ChatStatus(description=line)


def status_line(reply: AnswerResponse) -> str | None:
    """One line on how the reply was judged: consistent with the retrieved sources, repaired (by
    what), still unsupported, answered with an abstention, an "I don't know." the sources may
    answer, or not checked; None without a diagnosis. A passing answer is said to be consistent
    with the retrieved sources and no more: the check reads the sources as given, and a planted or
    wrong document passes it."""
    final = reply.diagnosis
    if final is None:
        return None
    if final.not_judged is not None:
        withheld = reply.answer_policy == "withheld"
        why = "the answer is withheld" if withheld else "the checks read English only"
        return f"Not checked against the retrieved sources: {why}"
    repair = reply.second_repair if isinstance(reply.second_repair, RepairTrace) else reply.repair
    repaired = isinstance(repair, RepairTrace) and repair.kept == "repaired"
    how = ""
    if repaired and isinstance(repair, RepairTrace):
        # The action's name only where the reply shows the policy's internals.
        how = f" after a repair ({repair.action.replace('_', ' ')})" if repair.action else " after a repair"
    if reply.abstained_by is not None:
        return f"Checked: the retrieved sources do not answer this question{how}"
    if reply.conflict_by is not None:
        return "Checked: the retrieved sources disagree on this; both sides are shown"
    if final.decided_by == "missed_answer":
        return "Checked: the retrieved sources may answer this question; the answer did not use them"
    if final.grade == "uncertain":
        p = final.verdict.p_unsupported if final.verdict is not None else None
        sure = f" ({round(100 * p)}% likely unsupported)" if p is not None else ""
        return f"Checked: possibly not supported by the retrieved sources{sure}; the answer is kept, marked"
    if final.failure == "NoFailure":
        return f"Consistent with the retrieved sources{how}; the sources themselves are not verified"
    return f"Checked: not supported by the retrieved sources{how}"
