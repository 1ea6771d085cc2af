"""Generator role: every call goes through litellm.

The embedded default is a GGUF model run in-process by llama-cpp-python and registered with
litellm as the custom provider "ragmend" (model strings "ragmend/<name>"). Setting
models.generator.model to any litellm model string (openai/..., ollama/..., hosted_vllm/...)
switches the deployment to that engine with no code change.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from ragmend import cancel, clock
from ragmend.errors import Cancelled, GeneratorError, GeneratorTimeout, ModelUnavailable
from ragmend.models import bundled, cpu_variant
from ragmend.models.gate import GateTimeout, ModelGate
from ragmend.models.generation import Generation, Purpose, TokenCount
from ragmend.models.generation_cache import GenerationCache, cache_key
from ragmend.models.loop_guard import LoopGuard
from ragmend.models.pace import Pace
from ragmend.models.runtime import prepare_libraries
from ragmend.settings import GeneratorSettings, Settings

PROVIDER = "ragmend"
log = logging.getLogger("ragmend.models")
# Prompt tokens evaluated anew in every call, whatever the KV cache holds (LocalGGUF._generating).
REEVALUATED = 64
TEMPLATE_TOKENS = 5  # a chat template's markers around each message (ChatML: about 5)
# How often, in generated tokens, a generation fits its decoding threads to the other requests again.
THREADS_EVERY = 8


class Activity:
    """How many requests are in progress in this process (threads inside an outermost
    `Generator.tally` block of any generator sharing it): the in-process model decodes on every
    core only while its request is the only one."""

    def __init__(self) -> None:
        self._count = 0
        self._lock = threading.Lock()
        self._thread = threading.local()  # this thread's nesting depth and seconds holding a model

    @property
    def count(self) -> int:
        return self._count

    def held(self, seconds: float) -> None:
        self._thread.s = self.held_s() + seconds

    def held_s(self) -> float:
        """Seconds the calling thread has held an in-process model (the wait for it excluded)."""
        return float(getattr(self._thread, "s", 0.0))

    @contextmanager
    def working(self) -> Iterator[None]:
        """One request in progress on this thread, however many generators' tallies it opens."""
        depth = int(getattr(self._thread, "depth", 0))
        self._thread.depth = depth + 1
        if depth == 0:
            with self._lock:
                self._count += 1
        try:
            yield
        finally:
            self._thread.depth = depth
            if depth == 0:
                with self._lock:
                    self._count -= 1


@dataclass
class InProcess:
    """What the in-process models of one registry share: the CPU. One generation at a time
    between them, in the gate's order (the earliest request deadline first), and one count of
    the requests in progress."""

    activity: Activity = field(default_factory=Activity)
    gate: ModelGate = field(default_factory=ModelGate)
    # Decode on one core fewer while another request is working; off where the other requests'
    # model work takes turns with the generations (models.take_turns): what is left beside a
    # generation is their Python steps, and a decoder fitted to those lost more than it saved.
    fit_threads: bool = True


class LocalGGUF:
    """One llama.cpp model in this process. llama.cpp contexts are not thread-safe, and the models
    of one process share its cores: one generation at a time among those sharing `shared.gate`,
    in the gate's order (the earliest request deadline first)."""

    def __init__(self, name: str, path: Path, params: GeneratorSettings, shared: InProcess | None = None):
        try:
            from llama_cpp import Llama
        except ImportError as e:
            raise ModelUnavailable("llama-cpp-python is not installed: pip install llama-cpp-python") from e
        self.name = name
        self.path = path
        self.shared = shared = shared or InProcess()
        self._activity = shared.activity
        cores = os.cpu_count() or 2
        # Decoding on every core; with shared.fit_threads, on all but one while another request
        # is working (its retrieval and diagnosis need a core; one waiting for the model needs
        # none); the prompt's evaluation on every core (the n_threads and n_threads_batch notes
        # in settings.py).
        fitted = (cores, max(1, cores - 1)) if shared.fit_threads else (cores,)
        self._decode_threads = (params.n_threads,) if params.n_threads else fitted
        self._batch_threads = params.n_threads_batch or cores
        self._threads = (self._decode_threads[0], self._batch_threads)
        try:
            self._llm = Llama(
                model_path=str(path),
                n_ctx=params.n_ctx,
                n_threads=self._threads[0],
                n_threads_batch=self._threads[1],
                seed=params.seed,
                verbose=False,
            )
        except Exception as e:  # llama.cpp reports a bad file as a bare ValueError/RuntimeError
            raise ModelUnavailable(f"generator model {path} could not be loaded: {e}") from e
        self._gate = shared.gate
        self._pace = Pace()  # this model's own speed
        # Free the llama.cpp context before interpreter teardown: left to __del__, it runs after
        # llama_cpp's module globals are gone and prints a TypeError at every exit.
        weakref.finalize(self, self._llm.close)

    def chat(
        self, messages: list[dict[str, str]], params: dict[str, Any], timeout_s: float | None = None
    ) -> dict[str, Any]:
        """One chat completion. With `timeout_s`, raises LocalTimeout once it has passed, counted
        from the call (the wait for the model included); see `_deadline_processor` for how."""
        with self._generating(messages, params, timeout_s) as (kwargs, recorder, guard):
            # llama-cpp types messages as its own TypedDicts; ours are the same role/content
            # dicts. Not streamed: it returns one completion dict (its stubs type the union).
            out = cast(
                dict[str, Any], self._llm.create_chat_completion(messages=cast(Any, messages), **kwargs)
            )
        message = out["choices"][0]["message"]
        message["content"] = guard.trim(message.get("content") or "")
        # In the OpenAI shape, which litellm carries through and Generator reads for any engine.
        tokens: list[dict[str, Any]] = [
            {"token": "", "logprob": lp, "bytes": None, "top_logprobs": []} for lp in recorder.values
        ]
        out["choices"][0]["logprobs"] = {"content": tokens}
        return out

    def stream(
        self, messages: list[dict[str, str]], params: dict[str, Any], timeout_s: float | None = None
    ) -> Iterator[dict[str, Any]]:
        """One chat completion as it is generated: a GenericStreamingChunk (litellm's custom
        provider shape) per piece of text, the last one finished with the usage and the tokens'
        log-probabilities. The model stays locked until the stream is drained or closed. A loop
        (LoopGuard) ends the stream after its copies were sent: sent text is not taken back."""
        with self._generating(messages, params, timeout_s) as (kwargs, recorder, _):
            finish = "stop"
            pieces = self._llm.create_chat_completion(messages=cast(Any, messages), stream=True, **kwargs)
            for chunk in cast(Iterator[dict[str, Any]], pieces):
                choice = chunk["choices"][0]
                finish = choice.get("finish_reason") or finish
                text = choice.get("delta", {}).get("content") or ""
                if text:
                    yield {"text": text, "is_finished": False, "finish_reason": "", "usage": None, "index": 0}
        completion = max(0, recorder.steps - (finish == "stop"))  # the end-of-sequence step is no token
        yield {
            "text": "",
            "is_finished": True,
            "finish_reason": finish,
            "index": 0,
            "usage": {
                "prompt_tokens": recorder.prompt_tokens,
                "completion_tokens": completion,
                "total_tokens": recorder.prompt_tokens + completion,
            },
            "provider_specific_fields": {"token_logprobs": list(recorder.values)},
        }

    @contextmanager
    def _generating(
        self, messages: list[dict[str, str]], params: dict[str, Any], timeout_s: float | None
    ) -> Iterator[tuple[dict[str, Any], TokenLogprobs, LoopGuard]]:
        """The model held for one generation, with its sampling arguments, the log-probability
        recorder, the loop guard and, with `timeout_s`, the deadline (LocalTimeout once it
        passed, counted from the call: the wait for the model included). A generation its
        request's deadline leaves no time for (Pace) is not started: the request is cancelled."""
        from llama_cpp import LogitsProcessorList

        kwargs: dict[str, Any] = {
            "max_tokens": params.get("max_tokens") or 128,
            "temperature": params.get("temperature", 0.0),
            "top_p": params.get("top_p", 1.0),
            "stop": params.get("stop"),
            "seed": params.get("seed"),
        }
        deadline = math.inf if timeout_s is None else time.monotonic() + timeout_s
        request = cancel.current()
        # Other requests' generations hold the model: waiting for it is part of this call's time,
        # and a request cancelled meanwhile leaves the line without generating.
        try:
            self._gate.acquire(request, deadline)
        except GateTimeout as e:
            if request.cancelled:
                raise LocalTimeout(str(e)) from None
            raise LocalTimeout(f"waited {timeout_s:g} s for the model (other generations held it)") from None
        locked = time.monotonic()
        if (short := self._short_of_time(messages, request)) is not None:
            self._gate.release()
            request.cancel("deadline")  # a repair's own token: its request still sends the first answer
            raise LocalTimeout(short)
        # llama-cpp-python evaluates only what follows the longest prefix the new prompt shares
        # with the previous one (the fixed instructions: a cold request's evidence and question
        # are all new). A prompt asked again would have only its last token evaluated, alone,
        # whose logits differ in the last bits from a batch's: at temperature 0 the same request
        # then gave another answer. So the cached prefix is cut back before every call: at least
        # the prompt's last REEVALUATED tokens are evaluated as one batch, as in a cold request.
        self._llm.n_tokens = max(0, self._llm.n_tokens - REEVALUATED)
        self._fit_threads()
        expired: list[bool] = []
        recorder = TokenLogprobs()
        guard = LoopGuard(self._llm.token_eos(), self._detokenize)
        processors: list[Any] = [recorder, guard]  # the recorder first: it reads the raw logits
        processors.append(self._stop_processor(deadline, request, expired))
        processors.append(self._threads_processor())
        kwargs["logits_processor"] = LogitsProcessorList(processors)
        try:
            yield kwargs, recorder, guard
        finally:
            ended = time.monotonic()
            if recorder.first_at is not None and not expired and not request.cancelled:
                prefill_s = recorder.first_at - locked
                self._pace.observe(recorder.prompt_tokens, prefill_s, ended - recorder.first_at)
            self._gate.release()
            self._activity.held(ended - locked)
        if expired:
            raise LocalTimeout(f"generation ran past {timeout_s:g} s")

    def _fit_threads(self) -> None:
        """Set the decoding threads for what the other requests in progress are doing now: every
        core where none is working (all of them waiting for the model, or none at all), all but
        one where another one is."""
        others_working = self._activity.count - 1 - self._gate.waiting
        threads = (self._decode_threads[0 if others_working <= 0 else -1], self._batch_threads)
        if threads != self._threads:
            self._llm._ctx.set_n_threads(*threads)
            self._threads = threads

    def _threads_processor(self) -> Any:
        """A logits processor that fits the decoding threads again every THREADS_EVERY tokens:
        a generation starts while the request before it is still diagnosing, and that request's
        core is free a moment later."""
        tokens = 0

        def fit(input_ids: Any, scores: Any) -> Any:
            nonlocal tokens
            tokens += 1
            if tokens % THREADS_EVERY == 0:
                self._fit_threads()
            return scores

        return fit

    def _short_of_time(self, messages: list[dict[str, str]], request: cancel.Cancellation) -> str | None:
        """Why a generation should not start: its request's time left is below what one of its
        prompt takes here (Pace); None when it fits, or the request has no deadline."""
        left = request.remaining()
        if math.isinf(left):  # outside a request (CLI, evaluation): nothing to measure against
            return None
        prompt_tokens = self._prompt_tokens(messages)
        expected = self._pace.expected_s(prompt_tokens)
        if expected is None or left >= expected:
            return None
        return (
            f"not started: the request's deadline leaves {left:.1f} s, less than the {expected:.1f} s "
            f"a generation of {prompt_tokens} prompt tokens takes"
        )

    def _prompt_tokens(self, messages: list[dict[str, str]]) -> int:
        """The messages' tokens, and a few per message for the chat template's markers."""
        text = "\n".join(str(m.get("content") or "") for m in messages)
        return len(self._llm.tokenize(text.encode("utf-8"), add_bos=False)) + TEMPLATE_TOKENS * len(messages)

    def _detokenize(self, tokens: list[int]) -> str:
        return self._llm.detokenize(tokens).decode("utf-8", errors="ignore")

    def _stop_processor(self, deadline: float, request: cancel.Cancellation, expired: list[bool]) -> Any:
        """A logits processor that forces end-of-sequence once `deadline` has passed (`expired`
        records it) or the request is cancelled (the caller sees that on the request's token).

        llama.cpp cannot be interrupted from another thread, and abandoning its thread would keep
        the model locked; ending the sequence stops the generation at the next token and leaves the
        context in a clean state for the next call. The prompt's evaluation is not interruptible:
        a call overruns its deadline by at most that and one token.
        """
        import numpy as np

        eos = self._llm.token_eos()

        def stop(input_ids: Any, scores: Any) -> Any:
            late = time.monotonic() >= deadline
            if late or request.cancelled:
                if late:
                    expired.append(True)
                scores[:] = -np.inf
                scores[eos] = 0.0
            return scores

        return stop


class TokenLogprobs:
    """A logits processor recording each generated token's log-probability, so the in-process
    model reports what a remote engine does with `logprobs: true` without llama.cpp's
    `logits_all` (logits kept for every prompt token: n_ctx x vocabulary floats).

    It sees the next token's logits and, one call later, which token was chosen (the last input
    id), whatever the sampler: the chosen token's log-softmax under the logits before it. The
    final token (end of sequence, or the last one at max_tokens) is not scored."""

    def __init__(self) -> None:
        self.values: list[float] = []
        self.steps = 0  # tokens sampled (the end of sequence included)
        self.prompt_tokens = 0  # the input at the first step
        self.first_at: float | None = None  # when the prompt's evaluation ended (monotonic)
        self._previous: Any = None  # the last call's logits (a copy: the array is reused)

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import numpy as np

        if self.steps == 0:
            self.prompt_tokens = len(input_ids)
            self.first_at = time.monotonic()
        self.steps += 1
        if self._previous is not None and len(input_ids):
            logits = self._previous
            top = float(logits.max())
            log_norm = top + float(np.log(np.exp(logits - top).sum()))
            self.values.append(round(float(logits[int(input_ids[-1])]) - log_norm, 4))
        self._previous = np.array(scores, dtype=np.float64, copy=True)
        return scores


class LocalTimeout(Exception):
    """The in-process model ran past its deadline (raised to litellm as its Timeout)."""


def _local_provider() -> Any:
    """The process's one litellm handler for "ragmend/<name>" models (litellm keeps a global map)."""
    import litellm
    from litellm import CustomLLM

    for entry in litellm.custom_provider_map:
        if entry.get("provider") == PROVIDER:
            return entry["custom_handler"]

    class LocalProvider(CustomLLM):
        def __init__(self) -> None:
            super().__init__()
            self.models: dict[str, LocalGGUF] = {}

        def _model(self, model: str) -> LocalGGUF:
            name = model.removeprefix(f"{PROVIDER}/")
            if name not in self.models:
                raise GeneratorError(f"local model '{name}' is not loaded; loaded: {sorted(self.models)}")
            return self.models[name]

        def completion(self, *args: Any, **kwargs: Any) -> Any:
            local = self._model(kwargs["model"])
            try:
                raw = local.chat(
                    kwargs["messages"], kwargs.get("optional_params") or {}, _seconds(kwargs.get("timeout"))
                )
            except LocalTimeout as e:
                # litellm passes its own Timeout through unchanged, as it does a remote provider's.
                raise litellm.Timeout(str(e), model=kwargs["model"], llm_provider=PROVIDER) from e
            return litellm.ModelResponse(**raw)

        async def acompletion(self, *args: Any, **kwargs: Any) -> Any:
            import asyncio

            return await asyncio.to_thread(self.completion, *args, **kwargs)

        def streaming(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
            local = self._model(kwargs["model"])
            pieces = local.stream(
                kwargs["messages"], kwargs.get("optional_params") or {}, _seconds(kwargs.get("timeout"))
            )
            try:
                yield from pieces
            except LocalTimeout as e:
                raise litellm.Timeout(str(e), model=kwargs["model"], llm_provider=PROVIDER) from e

    handler = LocalProvider()
    litellm.custom_provider_map = [
        *litellm.custom_provider_map,
        {"provider": PROVIDER, "custom_handler": handler},
    ]
    litellm.suppress_debug_info = True
    litellm.telemetry = False
    return handler


def _seconds(timeout: Any) -> float | None:
    """litellm's `timeout` as seconds: a number, or an httpx.Timeout (its read timeout)."""
    if timeout is None or isinstance(timeout, int | float):
        return None if timeout is None else float(timeout)
    read = getattr(timeout, "read", None)
    return float(read) if read is not None else None


def _detail(e: Exception) -> str:
    """litellm's message without its "litellm.Timeout: " prefix."""
    return str(e).split(": ", 1)[-1] if str(e).startswith("litellm.") else str(e)


def generator_source(g: GeneratorSettings, cache_dir: Path) -> tuple[str, str]:
    """(source description, path or litellm model string) of a generator's settings (the
    generator's, or the escalation's): its litellm model, its GGUF, or its bundled profile
    (assembled into `cache_dir` on first use)."""
    if g.model:
        return "litellm", g.model
    if g.gguf:
        return "local GGUF", str(g.gguf.expanduser())
    m = bundled.GENERATOR_PROFILES[g.profile]
    path = m.path(cache_dir) if isinstance(m, bundled.SplitGGUF) else m.path()
    return m.source, str(path)


@dataclass
class GeneratorTally:
    """What one thread spent in generator calls inside `Generator.tally()`."""

    seconds: float = 0.0
    # Of `seconds`, the generator's work for this thread: the in-process model held (the wait for
    # its lock excluded: that is other requests' work), or a remote call's whole time.
    busy_s: float = 0.0
    calls: int = 0
    usage: dict[Purpose, TokenCount] = field(default_factory=dict)  # tokens of the calls that answered

    def add(self, purpose: Purpose, tokens: TokenCount) -> None:
        self.usage[purpose] = self.usage.get(purpose, TokenCount()).plus(tokens)


class Generator:
    """Chat completion through litellm, whatever the engine behind it."""

    def __init__(self, model: str, params: GeneratorSettings, activity: Activity | None = None):
        self.model = model
        self._params = params
        self.cache = GenerationCache(params.cache) if params.cache else None
        self._local = threading.local()  # the tally of the calling thread, if one is open
        self.activity = activity or Activity()  # requests in progress: their outermost tallies

    @contextmanager
    def tally(self) -> Iterator[GeneratorTally]:
        """Count the seconds of this thread's calls inside the block: the engine's per-request
        generator time (first pass, rewrites, repair pass). A call's seconds include the wait for
        the in-process model, and a cached call counts at its recorded duration (as the
        request clock, ragmend.clock, counts it)."""
        outer = getattr(self._local, "tally", None)
        self._local.tally = tally = GeneratorTally()
        try:
            if outer is None:
                with self.activity.working():
                    yield tally
            else:
                yield tally
        finally:
            self._local.tally = outer
            if outer is not None:
                outer.seconds += tally.seconds
                outer.busy_s += tally.busy_s
                outer.calls += tally.calls
                for purpose, tokens in tally.usage.items():
                    outer.add(purpose, tokens)

    def chat(
        self,
        messages: list[dict[str, str]],
        max_tokens: int | None = None,
        temperature: float | None = None,
        stop: list[str] | None = None,
        seed: int | None = None,
        purpose: Purpose = "other",
        on_text: Callable[[str], None] | None = None,
    ) -> Generation:
        """One chat completion; `seed` overrides models.generator.seed (distinct samples).
        `purpose` files its tokens in the open tally's usage (the request's usage by purpose).
        `on_text`: the completion is streamed from the engine and each piece of text handed to
        it as it is generated (the whole Generation is still returned at the end)."""
        t0, replayed0, held0 = time.perf_counter(), clock.replayed(), self.activity.held_s()
        try:
            out = self._chat(
                messages, max_tokens, temperature=temperature, stop=stop, seed=seed, on_text=on_text
            )
            tally = getattr(self._local, "tally", None)
            if tally is not None:
                tally.add(purpose, TokenCount.of(out))
            return out
        finally:
            tally = getattr(self._local, "tally", None)
            if tally is not None:  # failed and timed-out calls took their time too
                elapsed = time.perf_counter() - t0
                tally.seconds += elapsed + clock.replayed() - replayed0
                local = self.model.startswith(f"{PROVIDER}/")
                tally.busy_s += self.activity.held_s() - held0 if local else elapsed
                tally.calls += 1

    def _chat(
        self,
        messages: list[dict[str, str]],
        max_tokens: int | None,
        temperature: float | None,
        stop: list[str] | None,
        seed: int | None = None,
        on_text: Callable[[str], None] | None = None,
    ) -> Generation:
        import litellm
        from openai import APITimeoutError

        p = self._params
        request = cancel.current()
        request.check("generator")
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "max_tokens": max_tokens or p.max_tokens,
            "temperature": p.temperature if temperature is None else temperature,
            "seed": p.seed if seed is None else seed,
            # Never past the request's deadline: a remote call is bounded by the time it has left.
            "timeout": min(p.timeout_s, request.remaining()),
        }
        if stop:
            kwargs["stop"] = stop
        if p.logprobs and self.model.split("/", 1)[0] != PROVIDER:
            kwargs["logprobs"] = True  # the in-process model records them without being asked
        key = None
        if self.cache is not None:
            sampling = {k: kwargs[k] for k in ("max_tokens", "temperature", "seed")} | {"stop": stop}
            key = cache_key(self.model, messages, sampling)
            if (hit := self.cache.get(key)) is not None:
                clock.replay(hit.seconds)  # the call counts at its recorded duration
                if on_text is not None:
                    on_text(hit.text)
                return hit
        if p.api_base:
            kwargs["api_base"] = p.api_base
        if p.api_key:
            kwargs["api_key"] = p.api_key.get_secret_value()
        t0 = time.perf_counter()
        try:
            if on_text is not None:
                gen = self._streamed(
                    litellm.completion(**kwargs, stream=True, stream_options={"include_usage": True}),
                    on_text,
                    t0,
                )
                request.check("generator")  # a cancelled stream ended early: not an answer to keep
                if self.cache is not None and key is not None:
                    self.cache.put(key, gen)
                return gen
            resp = litellm.completion(**kwargs)
            request.check("generator")
        except (GeneratorError, Cancelled):
            raise
        except APITimeoutError as e:  # litellm.Timeout: a remote provider's, or the local deadline
            request.check("generator")  # cancelled: the timeout it caused is not the generator's
            raise GeneratorTimeout(
                f"generator '{self.model}' did not answer within models.generator.timeout_s = "
                f"{p.timeout_s:g} s ({_detail(e)})"
            ) from e
        except Exception as e:  # litellm maps every provider's failure to its own exception types
            request.check("generator")
            # The provider's text names its host and may quote part of a key: the log has it, the
            # client gets the kind of failure only.
            log.warning("generator '%s' failed: %s: %s", self.model, type(e).__name__, e)
            raise GeneratorError(
                f"generator '{self.model}' failed: {type(e).__name__} (the server's log has the detail)"
            ) from e
        seconds = time.perf_counter() - t0
        choice = resp.choices[0]
        usage = getattr(resp, "usage", None)
        gen = Generation(
            text=(choice.message.content or "").strip(),
            model=self.model,
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            seconds=seconds,
            finish_reason=getattr(choice, "finish_reason", None),
            token_logprobs=_token_logprobs(choice),
        )
        if self.cache is not None and key is not None:
            self.cache.put(key, gen)
        return gen

    def _streamed(self, chunks: Any, on_text: Callable[[str], None], t0: float) -> Generation:
        """Drain a litellm stream, handing each text delta on; the Generation it adds up to."""
        text: list[str] = []
        logprobs: list[float] = []
        finish: str | None = None
        usage: Any = None
        first: float | None = None
        for chunk in chunks:
            usage = getattr(chunk, "usage", None) or usage
            for choice in chunk.choices or ():
                finish = choice.finish_reason or finish
                piece = choice.delta.content if choice.delta is not None else None
                if piece:
                    if first is None:
                        first = time.perf_counter() - t0
                    text.append(piece)
                    on_text(piece)
                # A remote engine's per-chunk logprobs; the in-process model's come at the end.
                logprobs += _token_logprobs(choice) or ()
                extra = getattr(choice.delta, "provider_specific_fields", None) or {}
                logprobs += extra.get("token_logprobs") or ()
        return Generation(
            text="".join(text).strip(),
            model=self.model,
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            seconds=time.perf_counter() - t0,
            finish_reason=finish,
            token_logprobs=tuple(logprobs) or None,
            first_token_s=first,
        )


def _token_logprobs(choice: Any) -> tuple[float, ...] | None:
    """The answer tokens' log-probabilities from an OpenAI-shaped choice (None when absent)."""
    logprobs = getattr(choice, "logprobs", None)
    content = getattr(logprobs, "content", None)
    if content is None and isinstance(logprobs, dict):
        content = logprobs.get("content")
    if not content:
        return None
    values = [t.get("logprob") if isinstance(t, dict) else getattr(t, "logprob", None) for t in content]
    return tuple(float(v) for v in values if v is not None) or None


def load_generator(g: GeneratorSettings, settings: Settings, shared: InProcess | None = None) -> Generator:
    """The generator of `g` (models.generator or models.escalation): a litellm model, or a GGUF
    served in-process. In-process models loaded with the same `shared` take turns on the CPU; a
    GGUF already loaded under its name is reused (the same file for two roles is one model)."""
    prepare_libraries(settings.models.allow_hub)
    shared = shared or InProcess()
    if g.model:
        return Generator(g.model, g, shared.activity)
    _, path = generator_source(g, settings.cache_dir)
    name = Path(path).stem if g.gguf else bundled.GENERATOR_PROFILES[g.profile].name
    if not Path(path).is_file():
        raise ModelUnavailable(f"generator GGUF not found: {path}")
    libraries = cpu_variant.select(g.cpu_variant, settings.cache_dir)
    provider = _local_provider()
    loaded = provider.models.get(name)
    if loaded is None or loaded.shared is not shared:
        provider.models[name] = LocalGGUF(name, Path(path), g, shared)
        log.info("generator %s: llama.cpp CPU libraries: %s", name, libraries)
    return Generator(f"{PROVIDER}/{name}", g, shared.activity)
