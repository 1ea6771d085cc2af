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
    for section in ("models", "rag", "diagnosis", "kg", "policy", "router", "server", "store", "collections"):
        assert getattr(loaded, section) == getattr(defaults, section), section


def test_live_settings_are_declared_on_the_fields() -> None:
    """Which settings change while the server runs is one marker on each field; every consumer
    (the policy, the engine, the hot reload, the admin PATCH model) derives its list from it."""
    from ragmend.engine.tunables import ENGINE_LIVE_KEYS
    from ragmend.policy.facade import LIVE_POLICY_KEYS
    from ragmend.server.admin import PATCHABLE, PolicyPatch
    from ragmend.server.reload import SERVER_LIVE_KEYS
    from ragmend.settings import PolicySettings, live_keys

    policy = {
        "kind",
        "alpha",
        "learn",
        "enabled_actions",
        "latency_budget_s",
        "memory_budget_bytes",
        "rss_memory_budget_bytes",
        "request_latency_budget_s",
        "budget_scale",
        "repair",
        "refresh_cooldown_s",
        "extra_repairs",
        "feedback_ttl_s",
    }
    server = {
        "api_keys",
        "admin_keys",
        "metrics_keys",
        "key_collections",
        "deny_unlisted_keys",
        "protect_metrics",
        "reload_poll_s",
        "answer_policy",
        "unanswered_below",
        "citations",
        "stream_mode",
        "message_id_header",
        "conflict_majority",
        "show_policy_internals",
        "feedback_votes_per_min",
        "feedback_burst",
        "feedback_share_window",
        "feedback_max_share",
    }
    router = {"enabled", "plans", "kind", "alpha", "learn"}
    assert set(live_keys()) == (
        {f"policy.{k}" for k in policy} | {f"server.{k}" for k in server} | {f"router.{k}" for k in router}
    )
    assert set(live_keys(PolicySettings)) == policy == set(LIVE_POLICY_KEYS) == set(PATCHABLE)
    assert set(PolicyPatch.model_fields) == policy
    assert set(ENGINE_LIVE_KEYS) == {f"policy.{k}" for k in policy} | {f"router.{k}" for k in router}
    assert set(SERVER_LIVE_KEYS) == {f"server.{k}" for k in server}
    assert "policy.context_dim" not in live_keys() and "rag.k" not in live_keys()


def test_one_wording_for_validation_errors() -> None:
    from pydantic import BaseModel, ValidationError

    from ragmend.errors import describe_validation

    class Inner(BaseModel):
        k: int

    class Outer(BaseModel):
        inner: Inner

    with pytest.raises(ValidationError) as caught:
        Outer.model_validate({"inner": {"k": "x"}})
    msg = "Input should be a valid integer, unable to parse string as an integer"
    assert describe_validation(caught.value) == f"inner.k: {msg}"
    assert describe_validation(caught.value, prefix="config") == f"config.inner.k: {msg}"
    assert describe_validation(caught.value, drop={"inner"}) == f"k: {msg}"
    with pytest.raises(ValidationError) as root:
        Inner.model_validate(3)
    assert describe_validation(root.value).startswith("(root): ")
    assert describe_validation(root.value, empty="body").startswith("body: ")


def test_collection_names_are_checked() -> None:
    s = load_settings(collections={"handbook": {"sources": ["/srv/h"], "policy": "own"}})
    handbook = s.collections["handbook"]
    assert handbook.policy == "own" and handbook.sources == (Path("/srv/h"),)
    for bad in ("Handbook", "default", "1st", "a-b", "x" * 41):
        with pytest.raises(ConfigError, match="collection name"):
            load_settings(collections={bad: {}})
    with pytest.raises(ConfigError, match="policy"):
        load_settings(collections={"h": {"policy": "mine"}})


def test_every_setting_says_what_it_does_in_one_description() -> None:
    """The description on each field is what --help, the JSON schema and docs/configuration.md say."""
    from ragmend.settings_reference import keys, sections

    rows = [k for prefix, model, default in sections() for k in keys(model, prefix, default)]
    assert len(rows) > 100
    undescribed = [k.key for k in rows if not k.description.strip()]
    assert not undescribed, f"settings without a description: {undescribed}"
    assert all(model.__doc__ for prefix, model, _ in sections() if prefix), "a section without a docstring"


def test_the_configuration_reference_is_generated_from_the_settings(tmp_path: Path) -> None:
    from ragmend.settings_reference import main, markdown

    published = Path(__file__).resolve().parent.parent / "docs" / "configuration.md"
    regenerate = "python -m ragmend.settings_reference docs/configuration.md, then commit it"
    assert published.read_text(encoding="utf-8") == markdown(), (
        f"docs/configuration.md is stale: {regenerate}"
    )
    text = markdown()
    # Every key with its environment variable, type, default and range, the live ones marked.
    row = next(line for line in text.splitlines() if line.startswith("| `rag.k`"))
    assert "`RAGMEND_RAG__K`" in row and "| int | `5` | >= 1, <= 100 |" in row
    assert "| yes |" in next(line for line in text.splitlines() if line.startswith("| `policy.alpha`"))
    # The stronger generator's section shows its own default (the large profile).
    assert '`"large"`' in next(
        line for line in text.splitlines() if line.startswith("| `models.escalation.profile`")
    )
    target = tmp_path / "configuration.md"
    assert main([str(target)]) == 0 and main([str(target), "--check"]) == 0
    target.write_text("stale")
    assert main([str(target), "--check"]) == 1


def test_config_show_says_where_each_value_came_from(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from typer.testing import CliRunner

    from ragmend.cli.main import app

    cfg = tmp_path / "c.yaml"
    key = "0123456789abcdef0123"
    cfg.write_text(
        f"rag:\n  k: 7\n  mode: bm25\nmodels:\n  escalation: null\nserver:\n  api_keys: ['{key}']\n"
    )
    monkeypatch.setenv("RAGMEND_RAG__K", "9")
    result = CliRunner().invoke(
        app, ["-c", str(cfg), "--data-dir", str(tmp_path), "config", "show", "--json"]
    )
    assert result.exit_code == 0, result.output
    rows = {r["key"]: (r["value"], r["origin"]) for r in json.loads(result.output)}
    assert rows["rag.k"] == (9, "environment") and rows["rag.mode"] == ("bm25", "file")
    assert rows["data_dir"] == (str(tmp_path), "command line") and rows["rag.chunk_size"] == (128, "default")
    assert rows["models.escalation"] == (None, "file")
    assert rows["server.api_keys"][0] == ["**********"] and key not in result.output  # secrets hidden
    # A section the command line gives replaces the file's null: its other keys are defaults.
    result = CliRunner().invoke(
        app, ["-c", str(cfg), "--profile", "tiny", "config", "show", "models.escalation", "--json"]
    )
    shown = {r["key"]: r["origin"] for r in json.loads(result.output)}
    assert (
        shown["models.escalation.profile"] == "command line" and shown["models.escalation.n_ctx"] == "default"
    )
    # A bad file is a clear error and an exit code, not a traceback.
    monkeypatch.delenv("RAGMEND_RAG__K")
    cfg.write_text("rag:\n  k: -1\n")
    result = CliRunner().invoke(app, ["-c", str(cfg), "config", "show"])
    assert result.exit_code != 0 and "rag.k" in result.output


def test_the_json_schema_carries_the_descriptions() -> None:
    import json

    from typer.testing import CliRunner

    from ragmend.cli.main import app

    result = CliRunner().invoke(app, ["config", "schema"])
    assert result.exit_code == 0, result.output
    alpha = json.loads(result.output)["$defs"]["PolicySettings"]["properties"]["alpha"]
    assert (
        alpha["description"] == "LinUCB's exploration weight (the paper trains with 2)."
        and alpha["minimum"] == 0
    )


def test_the_older_stream_verify_first_keeps_its_meaning() -> None:
    from ragmend.settings import ServerSettings

    assert ServerSettings().stream_mode == "draft"
    assert ServerSettings.model_validate({"stream_verify_first": True}).stream_mode == "verify_first"
    assert ServerSettings.model_validate({"stream_verify_first": "false"}).stream_mode == "live"
    both = {"stream_verify_first": True, "stream_mode": "draft"}
    assert ServerSettings.model_validate(both).stream_mode == "draft"  # the new key wins
    with pytest.raises(ValueError, match="stream_verify_first"):
        ServerSettings.model_validate({"stream_verify_first": "sometimes"})
