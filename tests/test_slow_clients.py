"""The server under abuse, over real HTTP with uvicorn configured as `ragmend serve` configures it
(server/connections.py, server/body_limit.py): a body trickled byte by byte is a 408 and its
connection is closed, a request head trickled (or never sent) is cut off, a body nobody reads
after an early answer is cut off, connections past server.max_connections get a 503 at once, and
the /v1 routes' body limit is apart from (and smaller than) the admin uploads'.

Raw sockets, because an HTTP client sends a request whole. The engine is never loaded: every
case is answered before any model work."""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ragmend.engine import Engine
from ragmend.server.app import create_app
from ragmend.settings import load_settings
from tests.conftest import LiveServer

KEY = "slow-clients-key-0123456789abcdef"
ADMIN = "slow-clients-admin-0123456789abcd"
HEADER_TIMEOUT_S = 1.0
BODY_TIMEOUT_S = 1.5
MAX_CONNECTIONS = 6
V1_BYTES = 10_000
UPLOAD_BYTES = 100_000
SLACK_S = 2.5  # what a loaded two-core machine may add to a deadline


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    data_dir: Path = tmp_path_factory.mktemp("slow-clients")
    settings = load_settings(
        data_dir=data_dir,
        server={
            "api_keys": [KEY],
            "admin_keys": [ADMIN],
            "max_body_bytes": V1_BYTES,
            "max_upload_bytes": UPLOAD_BYTES,
            "header_timeout_s": HEADER_TIMEOUT_S,
            "body_timeout_s": BODY_TIMEOUT_S,
            "max_connections": MAX_CONNECTIONS,
        },
    )
    app = create_app(settings, engine=Engine(settings), load_on_start=False)
    with LiveServer(app, served_as=settings.server) as live:
        yield live


def head(path: str, length: int, key: str | None = KEY) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json"]
    lines += [f"Content-Length: {length}"] + ([f"Authorization: Bearer {key}"] if key else [])
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def trickle(server: LiveServer, first: bytes, limit_s: float = 20.0) -> tuple[bytes, float | None, float]:
    """Send `first`, then one byte every 0.2 s (until the server answers) for at most `limit_s`:
    (what came back, seconds to its first byte (None: nothing), seconds until the server closed
    the connection)."""
    started = time.monotonic()
    got, answered_s = b"", None
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(first)
        while time.monotonic() - started < limit_s:
            if not got:
                try:
                    sock.sendall(b" ")
                except OSError:  # closed under us
                    break
            if select.select([sock], [], [], 0.2)[0]:
                try:
                    chunk = sock.recv(65536)
                except ConnectionResetError:
                    break
                if not chunk:
                    break
                got += chunk
                answered_s = answered_s or time.monotonic() - started
        else:
            raise AssertionError(f"the connection was still open after {limit_s} s; got {got!r}")
    return got, answered_s, time.monotonic() - started


def test_a_body_sent_byte_by_byte_is_a_408_and_its_connection_closed(server: LiveServer) -> None:
    got, answered_s, closed_s = trickle(server, head("/v1/answer", 1000))
    assert got.startswith(b"HTTP/1.1 408"), got
    assert b"server.body_timeout_s" in got and b"connection: close" in got.lower()
    assert answered_s is not None and BODY_TIMEOUT_S - 0.1 <= answered_s <= BODY_TIMEOUT_S + SLACK_S
    assert closed_s <= BODY_TIMEOUT_S + SLACK_S


def test_a_body_nobody_reads_is_cut_off_after_the_answer(server: LiveServer) -> None:
    """No key: a 401 at once, before the body is read; the rest, trickled, is not read for ever."""
    got, answered_s, closed_s = trickle(server, head("/v1/answer", 100_000, key=None))
    assert got.startswith(b"HTTP/1.1 401"), got
    assert answered_s is not None and answered_s < 1.0
    assert closed_s <= answered_s + BODY_TIMEOUT_S + SLACK_S


def test_a_request_head_sent_byte_by_byte_or_never_is_cut_off(server: LiveServer) -> None:
    got, _, closed_s = trickle(server, b"POST /v1/answer HTTP/1.1\r\nX-Slow: ")
    assert got == b"" and closed_s <= HEADER_TIMEOUT_S + SLACK_S
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", server.port), timeout=HEADER_TIMEOUT_S + SLACK_S) as silent:
        assert silent.recv(1) == b""  # closed, having sent nothing
    assert time.monotonic() - started <= HEADER_TIMEOUT_S + SLACK_S
    # A client that sends its requests whole is not hurried, kept alive between them.
    with httpx.Client(base_url=server.url, timeout=10) as client:
        assert client.get("/healthz").status_code == 200
        time.sleep(HEADER_TIMEOUT_S + 0.5)  # idle past the head's deadline, within keep-alive
        assert client.get("/healthz").status_code == 200


def test_connections_past_max_connections_get_a_503_at_once(server: LiveServer) -> None:
    idle = [socket.create_connection(("127.0.0.1", server.port), timeout=5) for _ in range(MAX_CONNECTIONS)]
    try:
        time.sleep(0.3)  # accepted by the server
        refused = httpx.get(server.url + "/healthz", timeout=5)
        assert refused.status_code == 503
    finally:
        for sock in idle:
            sock.close()
    time.sleep(0.3)
    assert httpx.get(server.url + "/healthz", timeout=5).status_code == 200


def test_v1_bodies_have_a_limit_of_their_own_below_the_uploads(server: LiveServer) -> None:
    auth = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    over_v1 = b'{"query": "' + b"x" * V1_BYTES + b'"}'
    declared = httpx.post(server.url + "/v1/answer", content=over_v1, headers=auth, timeout=10)
    assert declared.status_code == 413
    assert declared.json()["error"]["message"] == (
        f"request body is {len(over_v1)} bytes, over the limit of {V1_BYTES} (server.max_body_bytes)"
    )

    def chunked() -> Iterator[bytes]:  # no Content-Length: counted as read
        for i in range(0, len(over_v1), 4096):
            yield over_v1[i : i + 4096]

    counted = httpx.post(server.url + "/v1/chat/completions", content=chunked(), headers=auth, timeout=10)
    assert counted.status_code == 413
    assert counted.json()["error"]["message"] == (
        f"request body is over the limit of {V1_BYTES} bytes (server.max_body_bytes)"
    )
    # The same body is an upload's size: past the body limit to the route (here: no such collection).
    admin = {"Authorization": f"Bearer {ADMIN}", "Content-Type": "application/x-ndjson"}
    documents = "/admin/collections/nowhere/documents"
    upload = httpx.post(server.url + documents, content=over_v1, headers=admin, timeout=10)
    assert upload.status_code == 404, upload.text
    over_upload = b"x" * (UPLOAD_BYTES + 1)
    refused = httpx.post(server.url + documents, content=over_upload, headers=admin, timeout=10)
    assert refused.status_code == 413
    assert refused.json()["error"]["message"] == (
        f"request body is {len(over_upload)} bytes, over the limit of {UPLOAD_BYTES} "
        "(server.max_upload_bytes)"
    )
