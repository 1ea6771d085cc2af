"""Shared fixtures: real models (tiny generator profile), a small real corpus, real indexes."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from ragmend import pg
from ragmend.bench.speed.startup import free_port
from ragmend.engine import Engine
from ragmend.models import bundled
from ragmend.models.registry import ModelRegistry
from ragmend.settings import ServerSettings, Settings, load_settings, settings_with

REPO = Path(__file__).resolve().parent.parent
# The project's parts, listed once: the links in ragmend/ (ragmend/<part> -> <part>/). The layout
# test, the Dockerfile's test and anything else that names the parts read them from here.
PARTS = tuple(sorted(p.name for p in (REPO / "ragmend").iterdir() if p.is_symlink()))
SAMPLE_CORPUS = REPO / "rag" / "data" / "sample_corpus.jsonl"
SAMPLE_QUESTIONS = REPO / "rag" / "data" / "sample_questions.jsonl"
N_QUESTIONS = 8  # the corpus for tests: every paragraph of the first questions of the sample


def sample_questions(n: int = N_QUESTIONS) -> list[dict]:
    rows = [json.loads(line) for line in SAMPLE_QUESTIONS.read_text().splitlines() if line.strip()]
    return rows[:n]


@pytest.fixture(scope="session")
def small_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """About 80 paragraphs: gold and distractor paragraphs of the first sample questions."""
    wanted = set()
    for q in sample_questions():
        wanted.update(q["supporting_titles"])
    rows = [json.loads(line) for line in SAMPLE_CORPUS.read_text().splitlines() if line.strip()]
    # Gold paragraphs plus the first 70 others as distractors.
    chosen = [r for r in rows if r["title"] in wanted] + [r for r in rows if r["title"] not in wanted][:70]
    path = tmp_path_factory.mktemp("corpus") / "small.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in chosen))
    return path


def tiny_settings(data_dir: Path, **overrides: object) -> Settings:
    base = load_settings(
        data_dir=data_dir,
        cache_dir=data_dir / "cache",
        # The stronger generator is the tiny one too: its plans and the escalate action run fast.
        models={
            "generator": {"profile": "tiny", "max_tokens": 48},
            "escalation": {"profile": "tiny", "max_tokens": 48},
        },
    )
    return settings_with(base, **overrides)


@pytest.fixture(scope="session")
def registry(tmp_path_factory: pytest.TempPathFactory) -> ModelRegistry:
    """One set of loaded models for the whole session (loading is the slow part)."""
    return ModelRegistry(tiny_settings(tmp_path_factory.mktemp("models")))


@pytest.fixture(scope="session")
def engine(tmp_path_factory: pytest.TempPathFactory, registry: ModelRegistry, small_corpus: Path) -> Engine:
    data_dir = tmp_path_factory.mktemp("engine")
    settings = tiny_settings(data_dir, sources=[str(small_corpus)])
    eng = Engine(settings, models=ModelRegistry.sharing(registry, settings))
    eng.load()
    return eng


class LiveServer:
    def __init__(self, app: Any, served_as: ServerSettings | None = None):
        """`served_as`: with uvicorn configured as `ragmend serve` configures it from these settings
        (connection limits and deadlines: server/connections.py); else uvicorn's defaults."""
        from ragmend.server.connections import uvicorn_options

        self.port = free_port()
        options = uvicorn_options(served_as) if served_as is not None else {}
        self.server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", **options)
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                httpx.get(self.url + "/healthz", timeout=1)
                return self
            except httpx.HTTPError:
                time.sleep(0.05)
        raise RuntimeError("server did not start")

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


@pytest.fixture(scope="session")
def live_server(engine: Engine) -> Iterator[LiveServer]:
    from ragmend.server.app import create_app

    with LiveServer(create_app(engine.settings, engine=engine)) as server:
        yield server


@pytest.fixture(scope="session")
def random_nli_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small randomly initialised BERT cross-encoder with NLI labels: an interface fixture."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    out = tmp_path_factory.mktemp("random-nli")
    tokenizer = AutoTokenizer.from_pretrained(str(bundled.EMBEDDINGS.path()))
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
        # Three labels (num_labels follows id2label), deliberately not in NLI_ORDER: the role must
        # reorder the columns.
        id2label={0: "CONTRADICTION", 1: "ENTAILMENT", 2: "NEUTRAL"},
        label2id={"CONTRADICTION": 0, "ENTAILMENT": 1, "NEUTRAL": 2},
    )
    torch.manual_seed(0)
    BertForSequenceClassification(config).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


# -- the fast tier (make test-fast) --------------------------------------------------------------
# A test that uses one of these fixtures runs the engine with its generator (or a server over it):
# it is marked `generator` and `make test-fast` (-m "not generator") leaves it out. A module that
# drives the generator another way (the CLI, a subprocess) says so with pytestmark.
GENERATOR_FIXTURES = frozenset(
    {
        "engine",
        "live_server",
        "keyed_engine",
        "server",
        "serve",
        "no_repair_server",
        "repair_engine",
        "reloading",
    }
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if GENERATOR_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.generator)


@pytest.fixture(scope="session", autouse=True)
def _fast_tier_loads_no_generator(request: pytest.FixtureRequest) -> Iterator[None]:
    """Under -m "not generator", loading the generator fails the test that did it, with what to do:
    so the fast tier cannot quietly grow slow, and its selection is checked rather than trusted."""
    if "not generator" not in request.config.getoption("markexpr", ""):
        yield
        return

    def refuse(*_: object, **__: object) -> None:
        raise RuntimeError("this test loads the generator: mark it `generator` (tests/conftest.py)")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("ragmend.models.registry.load_generator", refuse)
        yield


# --- a real PostgreSQL (tests/test_postgres.py, tests/test_replicas.py) ------------------------


@pytest.fixture(scope="session")
def pg_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A real PostgreSQL (with pgvector) from the pgserver wheel, for this session only."""
    try:
        import pgserver
    except ImportError as e:
        pytest.skip(f"PostgreSQL cannot start here: the pgserver wheel is not installed ({e})")
    try:
        server = pgserver.get_server(tmp_path_factory.mktemp("pgdata"), cleanup_mode="stop")
    except Exception as e:  # whatever stops a server from starting is the reason to skip
        pytest.skip(f"PostgreSQL cannot start here: {type(e).__name__}: {e}")
    yield server
    server.cleanup()


_databases = iter(range(1_000_000))


@pytest.fixture
def dsn(pg_server: object) -> str:
    """A new database of that server, migrated to the current schema."""
    return new_database(pg_server, migrated=True)


def new_database(server: object, migrated: bool = False) -> str:
    """A new database of the pgserver `server` (empty, or migrated); its DSN."""
    uri: str = server.get_uri()  # type: ignore[attr-defined]
    return pg.create_database(uri, f"t{os.getpid()}_{next(_databases)}", migrated=migrated)
