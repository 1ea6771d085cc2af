from pathlib import Path

import pytest

from ragmend.errors import ConfigError
from ragmend.settings import load_settings, settings_with


def test_yaml_env_and_overrides_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "ragmend.yaml"
    cfg.write_text("rag:\n  k: 7\n  mode: bm25\nserver:\n  port: 9000\n")
    s = load_settings(cfg)
    assert (s.rag.k, s.rag.mode, s.server.port) == (7, "bm25", 9000)

    monkeypatch.setenv("RAGMEND_RAG__K", "9")
    s = load_settings(cfg)
    assert s.rag.k == 9 and s.rag.mode == "bm25"  # env beats the file, the file keeps the rest

    s = load_settings(cfg, rag={"k": 11})
    assert s.rag.k == 11 and s.rag.mode == "bm25"  # explicit overrides beat env


def test_config_file_from_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("models:\n  generator:\n    profile: tiny\n")
    monkeypatch.setenv("RAGMEND_CONFIG", str(cfg))
    assert load_settings().models.generator.profile == "tiny"


@pytest.mark.parametrize(
    ("yaml_text", "key"),
    [
        ("rag:\n  k: 0\n", "rag.k"),
        ("rag:\n  mode: sparse\n", "rag.mode"),
        ("rag:\n  chunk_size: 32\n  chunk_overlap: 32\n", "rag"),
        ("server:\n  prot: 1\n", "server.prot"),
        ("models:\n  generator:\n    temperature: -1\n", "models.generator.temperature"),
    ],
)
def test_invalid_values_name_the_key(tmp_path: Path, yaml_text: str, key: str) -> None:
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(yaml_text)
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load_settings(cfg)


def test_bad_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_settings(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("rag: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_settings(bad)
    bad.write_text("- a list\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_settings(bad)


def test_frozen_and_settings_with() -> None:
    s = load_settings()
    with pytest.raises(Exception):  # noqa: B017 - pydantic raises ValidationError for frozen models
        s.rag.k = 3  # type: ignore[misc]
    t = settings_with(s, rag={"k": 3}, models={"generator": {"profile": "tiny"}})
    assert (t.rag.k, t.models.generator.profile, t.rag.mode) == (3, "tiny", s.rag.mode)
    with pytest.raises(ConfigError, match=r"rag\.k"):
        settings_with(s, rag={"k": -1})


def test_the_example_config_loads_and_shows_the_defaults() -> None:
    example = Path(__file__).resolve().parent.parent / "deploy" / "ragmend.example.yaml"
    loaded = load_settings(example)
    defaults = load_settings()
    for section in ("models", "rag", "diagnosis", "kg", "policy", "server"):
        assert getattr(loaded, section) == getattr(defaults, section), section
