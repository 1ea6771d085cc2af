"""`ragmend feedback sync`: Open WebUI's thumbs up and down, posted to a running ragmend as votes
that teach its policy (integrations/openwebui.py; docs/api.md, "Thumbs from Open WebUI")."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Annotated

import typer

from ragmend.cli.common import err, run, settings
from ragmend.errors import ConfigError, PeerUnavailable

feedback_app = typer.Typer(
    help="Users' votes from chat UIs: Open WebUI's ratings as ragmend votes.\n\n"
    "Example: OPENWEBUI_API_KEY=sk-... ragmend feedback sync --openwebui http://127.0.0.1:8080",
    no_args_is_help=True,
)


def read_key(env: str, key_file: Path | None) -> str | None:
    """A key from its file (first line) or its environment variable: never from the command
    line, where other users of the machine read it in the process list."""
    if key_file is not None:
        try:
            key = key_file.read_text(encoding="utf-8").strip().splitlines()
        except OSError as e:
            raise ConfigError(f"{key_file}: cannot read the key ({e.strerror})") from e
        if not key or not key[0].strip():
            raise ConfigError(f"{key_file}: empty; the key goes on its first line")
        return key[0].strip()
    return os.environ.get(env) or None


@feedback_app.command("sync")
def feedback_sync(
    openwebui: Annotated[str, typer.Option("--openwebui", help="Open WebUI's address.")],
    ragmend_url: Annotated[
        str | None,
        typer.Option("--ragmend", help="The ragmend server (default: server.host and server.port)."),
    ] = None,
    openwebui_key_file: Annotated[
        Path | None,
        typer.Option(help="A file whose first line is an Open WebUI admin's key (else OPENWEBUI_API_KEY)."),
    ] = None,
    ragmend_key_file: Annotated[
        Path | None,
        typer.Option(help="A file whose first line is a key of server.api_keys (else RAGMEND_API_KEY)."),
    ] = None,
    state: Annotated[
        Path | None,
        typer.Option(help="How far the sync has read (default: <data_dir>/openwebui-sync.json)."),
    ] = None,
    watch: Annotated[
        float | None,
        typer.Option(help="Sync again every this many seconds until stopped (a peer that fails is retried)."),
    ] = None,
) -> None:
    """Post the ratings given in Open WebUI since the last sync to ragmend as votes. Prints one
    JSON line a sync: ratings read, voted, already voted, kept_first (changed in Open WebUI after
    ragmend learned the first: one vote per answer), unknown (not an answer ragmend kept under
    that message id), expired (past policy.feedback_ttl_s).

    Example: ragmend feedback sync --openwebui http://127.0.0.1:8080 --watch 60
    """
    from ragmend.integrations.openwebui import OpenWebUIRatings, RagmendVotes, SyncState, sync

    def work() -> None:
        s = settings()
        if watch is not None and watch <= 0:
            raise ConfigError("--watch: seconds between syncs, more than 0")
        ratings = OpenWebUIRatings(openwebui, read_key("OPENWEBUI_API_KEY", openwebui_key_file))
        votes = RagmendVotes(
            ragmend_url or f"http://{s.server.host}:{s.server.port}",
            read_key("RAGMEND_API_KEY", ragmend_key_file),
        )
        path = state or s.data_dir / "openwebui-sync.json"
        try:
            while True:
                try:
                    print(json.dumps(sync(ratings, votes, SyncState.load(path)).as_dict()), flush=True)
                except PeerUnavailable as e:
                    if watch is None:
                        raise
                    err.print(f"[yellow]sync failed, retried in {watch:g} s:[/] {e}")
                if watch is None:
                    return
                time.sleep(watch)
        except KeyboardInterrupt:
            return
        finally:
            ratings.close()
            votes.close()

    run(work)
