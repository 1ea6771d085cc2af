"""Start and stop: `ragmend serve`'s uvicorn run, and what the app does when it stops.

On SIGTERM (or SIGINT) uvicorn stops accepting connections, waits up to
server.shutdown_timeout_s for the requests in flight (queued ones included) to be answered, then
runs the app's lifespan shutdown: `shut_down` waits (as long again at most) for the model work of
cancelled requests to stop in their worker threads, and then closes the engine, which
closes the policy's SQLite state store (its WAL checkpointed into the main file). Only then does
the process exit, with status 0.
"""

from __future__ import annotations

import logging
import signal
from types import FrameType
from typing import TYPE_CHECKING, Any

from anyio import to_thread

if TYPE_CHECKING:
    from ragmend.engine import Engine
    from ragmend.server.admission import Admission
    from ragmend.settings import ServerSettings

log = logging.getLogger("ragmend.server")


async def shut_down(admission: Admission, engine: Engine | None, timeout_s: float) -> None:
    """The lifespan's end: let cancelled work stop, then close the engine (None: the caller
    owns it and closes it)."""
    await admission.drain(timeout_s)
    if engine is not None:
        # Off the loop: closing checkpoints the policy's WAL (an fsync).
        await to_thread.run_sync(engine.close)
        log.info("engine closed")


def serve(app: Any, host: str, port: int, server: ServerSettings) -> None:
    """uvicorn's run, configured from `server` (server/connections.py: connection limits and
    deadlines), with a graceful SIGTERM that exits 0.

    uvicorn re-raises the signal it stopped on once it has shut down, with the handler that was
    installed before it started: under the default handler a SIGTERM would end the process with
    status 143 after a clean shutdown. A handler that only logs makes that re-raise a no-op, so a
    completed graceful shutdown returns normally and the process exits 0.
    """
    import uvicorn

    from ragmend.server.connections import uvicorn_options

    def stopped(signum: int, frame: FrameType | None) -> None:
        log.info("stopped on SIGTERM after a graceful shutdown")

    previous = signal.signal(signal.SIGTERM, stopped)
    try:
        uvicorn.run(app, host=host, port=port, log_level="info", **uvicorn_options(server))
    finally:
        signal.signal(signal.SIGTERM, previous)
