"""Live streaming of a chat completion: the first answer's text reaches the client as the
generator makes it; the diagnosis (and a repair) follow when it is complete.

The engine runs in a worker thread (admission control); the generator hands each piece of text to
`TextPipe.put`, which passes it to the event loop, where the response's event generator reads it.
How the first answer travels before it is checked (server.stream_mode, or stream_options.mode per
request; docs/api.md, "Streaming"):

- `draft` (the default): the first answer is streamed as it is generated in the deltas'
  `reasoning_content`, under a line saying it is a draft being checked; clients that render a
  model's reasoning (Open WebUI among them) show it apart from the answer, the others ignore it.
  When the check is done, the answer the user reads follows as `content`, exactly the unstreamed
  reply's: nothing sent as the answer is ever contradicted or said twice.
- `live`: the first answer is streamed as content. When the diagnosis finds it unsupported and a
  repair replaces it, a clearly marked correction follows in the same stream, led by one line
  saying what changed and why ("[Correction] The answer above is replaced, as ...: ...");
  when the final answer is still unsupported, the answer policy's note follows (or, as a
  correction, its abstention or both sides of a conflict in the evidence); an uncertain failure's
  answer stays, followed by the note saying how sure the check is; an answer the diagnosis could
  not judge is followed by the note saying so, or, where the answer policy withholds it, by the
  correction that withholds it. A streamed answer that already abstains ("I don't know.") is not
  followed by the abstention too: it is said once. Citations are in the `ragmend` extension of
  the last chunk (the markers cannot be put into text already sent).
- `verify_first`: the stream is held until the diagnosis and any repair are done, then the answer
  the user reads is sent, exactly as the unstreamed reply's content.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from ragmend.diagnosis.hypotheses import is_abstention
from ragmend.engine.outcome import Outcome
from ragmend.engine.presentation import correction
from ragmend.server.schemas import AnswerResponse


class TextPipe:
    """Pieces of text from a worker thread to the event loop, in order."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[str] = asyncio.Queue()

    def put(self, piece: str) -> None:  # called in the worker thread
        self._loop.call_soon_threadsafe(self._queue.put_nowait, piece)

    async def first(self, task: asyncio.Future[Any]) -> str | None:
        """The first piece, or None when the work ended (or failed) before any text came."""
        get = asyncio.ensure_future(self._queue.get())
        done, _ = await asyncio.wait({get, task}, return_when=asyncio.FIRST_COMPLETED)
        if get in done:
            return get.result()
        get.cancel()
        return self._drain() or None

    async def rest(self, task: asyncio.Future[Any]) -> AsyncIterator[str]:
        """Every further piece until the work ends (the ones queued as it ended included)."""
        while True:
            get = asyncio.ensure_future(self._queue.get())
            done, _ = await asyncio.wait({get, task}, return_when=asyncio.FIRST_COMPLETED)
            if get in done:
                yield get.result()
                continue
            get.cancel()
            if tail := self._drain():
                yield tail
            return

    def _drain(self) -> str:
        pieces = []
        while not self._queue.empty():
            pieces.append(self._queue.get_nowait())
        return "".join(pieces)


def tail(outcome: Outcome, reply: AnswerResponse) -> str:
    """What follows the streamed first answer, so that the stream ends with what the user should
    read: a marked correction when a repair's answer replaced it (or the policy abstained), the
    policy's note when it stands unsupported, else nothing. An abstention the stream already
    carried is not corrected into a second one."""
    streamed = outcome.first or outcome.answer
    if reply.abstained_by is not None and is_abstention(streamed.response):
        return ""
    if reply.answer_policy in ("abstain", "gated", "conflict", "withheld"):
        return f"\n\n{correction(reply.answer)}"
    if outcome.first is not None and outcome.answer is not outcome.first:
        first = outcome.first_diagnosis
        return f"\n\n{correction(reply.answer, first.failure if first else None)}"
    return f" {reply.answer_note}" if reply.answer_note else ""
