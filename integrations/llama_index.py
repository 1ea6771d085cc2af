"""ragmend's diagnosis as a llama-index evaluator: the faithfulness check of llama-index's
evaluation pipelines, answered by a ragmend server (POST /v1/diagnose; docs/api.md, "Check any
answer").

    from ragmend.integrations.llama_index import RagmendEvaluator

    evaluator = RagmendEvaluator("http://127.0.0.1:8000", api_key=None)
    result = evaluator.evaluate(query=question, response=answer, contexts=passages)
    result.passing   # False: the diagnosis found a failure; None: not judged (not English)
    result.score     # 1 - the verdict's P(unsupported)
    result.feedback  # the failure type, the stage and where the response is unsupported

`evaluate_response(query, response)` reads a llama-index Response's text and its source nodes.
Without contexts the server retrieves passages from its own corpus for the query.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx
from llama_index.core.evaluation import BaseEvaluator, EvaluationResult
from llama_index.core.prompts.mixin import PromptDictType


class RagmendEvaluator(BaseEvaluator):
    """Judges whether a response is supported by its contexts, with a ragmend server's diagnosis.

    `model`: the server's corpus (a name of GET /v1/models) whose settings serve the check, and
    whose retrieval finds passages when no contexts are given.
    """

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000",
        api_key: str | None = None,
        model: str | None = None,
        timeout_s: float = 120.0,
    ):
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout_s = timeout_s
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def _get_prompts(self) -> PromptDictType:
        return {}  # no prompt: the diagnosis is not an LLM judge

    def _update_prompts(self, prompts_dict: PromptDictType) -> None:
        return None

    def body(self, query: str | None, response: str | None, contexts: Sequence[str] | None) -> dict[str, Any]:
        """The /v1/diagnose request of one evaluation."""
        if response is None:
            raise ValueError("response: needed; the evaluator checks a response against its contexts")
        body: dict[str, Any] = {"answer": response, "question": query}
        if contexts is not None:
            body["passages"] = [{"text": c} for c in contexts]
        if self.model is not None:
            body["model"] = self.model
        return body

    def evaluate(
        self,
        query: str | None = None,
        response: str | None = None,
        contexts: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> EvaluationResult:
        # A plain HTTP call, not llama-index's asyncio_run: that one answers an error raised inside
        # the coroutine with "cannot reuse already awaited coroutine", hiding the server's message.
        with httpx.Client(timeout=self.timeout_s, headers=self._headers) as client:
            r = client.post(f"{self.base_url}/v1/diagnose", json=self.body(query, response, contexts))
        return self._result(query, response, contexts, r)

    async def aevaluate(
        self,
        query: str | None = None,
        response: str | None = None,
        contexts: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> EvaluationResult:
        async with httpx.AsyncClient(timeout=self.timeout_s, headers=self._headers) as client:
            r = await client.post(f"{self.base_url}/v1/diagnose", json=self.body(query, response, contexts))
        return self._result(query, response, contexts, r)

    def _result(
        self, query: str | None, response: str | None, contexts: Sequence[str] | None, r: httpx.Response
    ) -> EvaluationResult:
        if r.status_code != 200:
            raise RagmendCheckError(r.status_code, _message(r))
        assert response is not None  # body() refused a missing one
        return result(query, response, contexts, r.json())


class RagmendCheckError(RuntimeError):
    """The server refused or failed the check: its HTTP status and message."""

    def __init__(self, status: int, message: str):
        super().__init__(f"ragmend /v1/diagnose answered {status}: {message}")
        self.status = status


def result(
    query: str | None, response: str, contexts: Sequence[str] | None, checked: dict[str, Any]
) -> EvaluationResult:
    """The EvaluationResult of one /v1/diagnose response."""
    d = checked["diagnosis"]
    passages = [p["text"] for p in checked["passages"]]
    if d.get("not_judged"):
        return EvaluationResult(
            query=query,
            response=response,
            contexts=list(contexts) if contexts is not None else passages,
            invalid_result=True,
            invalid_reason=d["not_judged"],
        )
    verdict = d.get("verdict")
    supported = bool(checked["supported"])
    score = 1.0 - float(verdict["p_unsupported"]) if verdict else float(supported)
    return EvaluationResult(
        query=query,
        response=response,
        contexts=list(contexts) if contexts is not None else passages,
        passing=supported,
        score=score,
        feedback=feedback(d),
    )


def feedback(d: dict[str, Any]) -> str:
    """A sentence a person reads: the verdict, why, and where the response is unsupported."""
    if d["failure"] == "NoFailure":
        # Consistency with the passages is all the check says: it does not vouch for them.
        return "supported: every claim of the response is consistent with the passages (themselves unchecked)"
    where = " | ".join(s["text"] for s in d.get("unsupported_spans", ())) or "(none singled out)"
    return f"unsupported ({d['failure']}, {d['stage']}): {d['stage_reason']}. Unsupported: {where}"


def _message(r: httpx.Response) -> str:
    try:
        return str(r.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return r.text[:500]
