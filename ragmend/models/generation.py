"""The value one generator call returns, and what a request's calls used, by purpose."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

# Why a call was made (usage and the tokens counter are split by it): the first pass's answer,
# the repair pass's, a query rewrite (a repair action), condensing a follow-up, anything else.
Purpose = Literal["answer", "repair", "rewrite", "condense", "other"]
PURPOSES: tuple[Purpose, ...] = get_args(Purpose)


@dataclass(frozen=True, kw_only=True)
class Generation:
    text: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    finish_reason: str | None = None
    cached: bool = False  # served from the generation cache; `seconds` is the original call's
    # Each answer token's log-probability as the engine reported it; None where it reports none
    # (an engine without logprobs, or a cache entry written before they were recorded).
    token_logprobs: tuple[float, ...] | None = None
    # Seconds from the call to the first piece of text, for a streamed call (the prompt's
    # evaluation and the first token: what a streaming user waits for); None unstreamed.
    first_token_s: float | None = None


@dataclass(frozen=True)
class TokenCount:
    """The tokens of some generator calls (those of one purpose in one request)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0

    def plus(self, other: TokenCount) -> TokenCount:
        return TokenCount(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.calls + other.calls,
        )

    @staticmethod
    def of(g: Generation) -> TokenCount:
        return TokenCount(g.prompt_tokens, g.completion_tokens, 1)
