"""Property-based tests of every route from the live app's own OpenAPI spec (schemathesis): no input,
valid or not, gets a 5xx.

The schemathesis CLI runs in a subprocess against the live server (real HTTP), in two runs:

- the cheap routes (health, readiness, metrics, models, admin): valid and invalid inputs, up to
  FAST_EXAMPLES each. The admin routes answer 403 there (the shared server has no admin keys),
  so they get a run of their own with a key, against a server over a copy of the data directory:
  generated requests reset and import the policy's state and refresh the index, which must not
  change what the rest of the session sees.
- the model-calling routes (/v1/answer, /v1/chat/completions, /v1/diagnose and its batch): a
  valid request is a real retrieval, generation, diagnosis and maybe a repair, 5-15 s each on 2
  cores (a check: up to 64 answers against passages of up to 50,000 characters), so only invalid
  bodies are generated (negative mode; they are refused before any model work), up to
  MODEL_EXAMPLES per route. Valid requests over real HTTP are tests/test_openai_api.py's,
  tests/test_server.py's and tests/test_diagnose_api.py's. That keeps this file at about 10 s
  once the live server is up.

A failure prints schemathesis' report with the request that produced the 5xx and how to replay it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ragmend.engine import Engine
from ragmend.server.app import create_app
from ragmend.settings import settings_with
from tests.conftest import LiveServer

SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")
MODEL_ROUTES = ("/v1/answer", "/v1/chat/completions", "/v1/diagnose", "/v1/diagnose/batch")
FAST_EXAMPLES = 25
MODEL_EXAMPLES = 40
ADMIN_KEY = "schemathesis-admin-key-0123456789"


def schemathesis(server: LiveServer, workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [
        str(SCHEMATHESIS),
        "run",
        f"{server.url}/openapi.json",
        "--checks",
        "not_a_server_error",
        "--workers",
        "1",  # 2 cores, one of them the server's
        "--seed",
        "20240601",  # the same cases every run: a failure reproduces
        "--generation-database",
        "none",  # nothing written into the working tree (cwd is a temporary directory anyway)
        "--suppress-health-check",
        "all",  # too_slow: the server is slow on purpose (the model routes), not the generation
        "--request-timeout",
        "120",
        "--no-color",
        *args,
    ]
    return subprocess.run(command, cwd=workdir, capture_output=True, text=True, timeout=300)


def excluding(paths: tuple[str, ...]) -> list[str]:
    return [arg for p in paths for arg in ("--exclude-path", p)]


def including(paths: tuple[str, ...]) -> list[str]:
    return [arg for p in paths for arg in ("--include-path", p)]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("schemathesis")


def test_no_5xx_on_the_cheap_routes(live_server: LiveServer, workdir: Path) -> None:
    run = schemathesis(live_server, workdir, "--max-examples", str(FAST_EXAMPLES), *excluding(MODEL_ROUTES))
    assert run.returncode == 0, run.stdout + run.stderr


def test_no_5xx_on_the_model_routes(live_server: LiveServer, workdir: Path) -> None:
    run = schemathesis(
        live_server,
        workdir,
        "--mode",
        "negative",
        "--phases",
        "coverage,fuzzing",
        "--max-examples",
        str(MODEL_EXAMPLES),
        *including(MODEL_ROUTES),
    )
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.fixture(scope="module")
def admin_server(engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A server with an admin key over a copy of the session's data directory (index, graph,
    policy state) and the session's loaded models."""
    data_dir = tmp_path_factory.mktemp("admin-data") / "data"
    shutil.copytree(engine.settings.data_dir, data_dir)
    settings = settings_with(engine.settings, data_dir=data_dir, server={"admin_keys": [ADMIN_KEY]})
    copy = Engine(settings, models=engine.models)
    copy.load()
    with LiveServer(create_app(settings, engine=copy, load_on_start=False)) as server:
        yield server
    copy.close()


def test_no_5xx_on_the_admin_routes(admin_server: LiveServer, workdir: Path) -> None:
    run = schemathesis(
        admin_server,
        workdir,
        "--header",
        f"Authorization: Bearer {ADMIN_KEY}",
        "--max-examples",
        str(FAST_EXAMPLES),
        "--include-path-regex",
        "^/admin/",
    )
    assert run.returncode == 0, run.stdout + run.stderr
