"""Generator role: every call goes through litellm.

The embedded default is a GGUF model run in-process by llama-cpp-python and registered with
litellm as the custom provider "ragmend" (model strings "ragmend/<name>"). Setting
models.generator.model to any litellm model string (openai/..., ollama/..., hosted_vllm/...)
switches the deployment to that engine with no code change.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from pathlib import Path
from typing import Any

from ragmend.errors import GeneratorError, ModelUnavailable
from ragmend.models import bundled
from ragmend.models.generation import Generation
from ragmend.models.generation_cache import GenerationCache, cache_key
from ragmend.models.runtime import prepare_libraries
from ragmend.settings import GeneratorSettings, Settings

PROVIDER = "ragmend"


class LocalGGUF:
    """One llama.cpp model in this process. llama.cpp contexts are not thread-safe: one lock."""

    def __init__(self, name: str, path: Path, params: GeneratorSettings):
        try:
            from llama_cpp import Llama
        except ImportError as e:
            raise ModelUnavailable("llama-cpp-python is not installed: pip install llama-cpp-python") from e
        self.name = name
        self.path = path
        try:
            self._llm = Llama(
                model_path=str(path),
                n_ctx=params.n_ctx,
                n_threads=params.n_threads or max(1, (os.cpu_count() or 2) - 1),
                seed=params.seed,
                verbose=False,
            )
        except Exception as e:  # llama.cpp reports a bad file as a bare ValueError/RuntimeError
            raise ModelUnavailable(f"generator model {path} could not be loaded: {e}") from e
        self._lock = threading.Lock()
        # Free the llama.cpp context before interpreter teardown: left to __del__, it runs after
        # llama_cpp's module globals are gone and prints a TypeError at every exit.
        weakref.finalize(self, self._llm.close)

    def chat(self, messages: list[dict[str, str]], params: dict[str, Any]) -> dict[str, Any]:
        kwargs = {
            "max_tokens": params.get("max_tokens") or 128,
            "temperature": params.get("temperature", 0.0),
            "top_p": params.get("top_p", 1.0),
            "stop": params.get("stop"),
            "seed": params.get("seed"),
        }
        with self._lock:
            return self._llm.create_chat_completion(messages=messages, **kwargs)


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
            raw = local.chat(kwargs["messages"], kwargs.get("optional_params") or {})
            return litellm.ModelResponse(**raw)

        async def acompletion(self, *args: Any, **kwargs: Any) -> Any:
            import asyncio

            return await asyncio.to_thread(self.completion, *args, **kwargs)

    handler = LocalProvider()
    litellm.custom_provider_map = [
        *litellm.custom_provider_map,
        {"provider": PROVIDER, "custom_handler": handler},
    ]
    litellm.suppress_debug_info = True
    litellm.telemetry = False
    return handler


def generator_source(settings: Settings) -> tuple[str, str]:
    """(source description, path or litellm model string) for the configured generator."""
    g = settings.models.generator
    if g.model:
        return "litellm", g.model
    if g.gguf:
        return "local GGUF", str(g.gguf.expanduser())
    m = bundled.GENERATOR_PROFILES[g.profile]
    path = m.path(settings.cache_dir) if isinstance(m, bundled.SplitGGUF) else m.path()
    return m.source, str(path)


class Generator:
    """Chat completion through litellm, whatever the engine behind it."""

    def __init__(self, model: str, params: GeneratorSettings):
        self.model = model
        self._params = params
        self.cache = GenerationCache(params.cache) if params.cache else None

    def chat(
        self,
        messages: list[dict[str, str]],
        max_tokens: int | None = None,
        temperature: float | None = None,
        stop: list[str] | None = None,
    ) -> Generation:
        import litellm

        p = self._params
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "max_tokens": max_tokens or p.max_tokens,
            "temperature": p.temperature if temperature is None else temperature,
            "seed": p.seed,
            "timeout": p.timeout_s,
        }
        if stop:
            kwargs["stop"] = stop
        key = None
        if self.cache is not None:
            sampling = {k: kwargs[k] for k in ("max_tokens", "temperature", "seed")} | {"stop": stop}
            key = cache_key(self.model, messages, sampling)
            if (hit := self.cache.get(key)) is not None:
                return hit
        if p.api_base:
            kwargs["api_base"] = p.api_base
        if p.api_key:
            kwargs["api_key"] = p.api_key.get_secret_value()
        t0 = time.perf_counter()
        try:
            resp = litellm.completion(**kwargs)
        except GeneratorError:
            raise
        except Exception as e:  # litellm maps every provider's failure to its own exception types
            raise GeneratorError(f"generator '{self.model}' failed: {type(e).__name__}: {e}") from e
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
        )
        if self.cache is not None and key is not None:
            self.cache.put(key, gen)
        return gen


def load_generator(settings: Settings) -> Generator:
    prepare_libraries(settings.models.allow_hub)
    g = settings.models.generator
    if g.model:
        return Generator(g.model, g)
    _, path = generator_source(settings)
    name = Path(path).stem if g.gguf else bundled.GENERATOR_PROFILES[g.profile].name
    if not Path(path).is_file():
        raise ModelUnavailable(f"generator GGUF not found: {path}")
    provider = _local_provider()
    provider.models[name] = LocalGGUF(name, Path(path), g)
    return Generator(f"{PROVIDER}/{name}", g)
