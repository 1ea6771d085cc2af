"""Hot reload of the tunable configuration: when the configuration file changes, and on SIGHUP.

A small thread polls the file every server.reload_poll_s seconds (2 by default: mtime, size and
a SHA-256 of the content, so an edit that keeps the size and the mtime's second still shows; no
new dependency). A reload is load_settings(path) with the same overrides and environment as at
start, validated as at start; then Engine.apply_tunables applies the tunable part (the policy's
alpha, kind, learn, enabled actions and budgets, repair on/off, the refresh cool-down; here also
the server's keys, protect_metrics and reload_poll_s) and warns about any other changed key ("needs
a restart"). An invalid file is logged with the key it names and counted result="error"; the
running configuration stays. Reloads run on this thread, never on the event loop, and a request
reads the engine's settings with one attribute read: no request is dropped or sees half a change.

SIGHUP is installed only from the main thread (uvicorn.run's lifespan runs there; a server run in
a thread, like the tests' LiveServer, gets the file watch only). uvicorn handles SIGINT and SIGTERM
and leaves SIGHUP alone; the previous handler is put back when the app stops. The handler only
flags the request and wakes the thread: the reload itself never runs inside a signal handler.

Changes made through the admin API are not written to the file: the file wins at its next reload
(docs/operations.md).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import signal
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from ragmend.errors import ConfigError, RagmendError
from ragmend.instrumentation import Events
from ragmend.server.auth import keyless
from ragmend.server.events import ConfigChanged
from ragmend.settings import ServerSettings, live_keys, load_settings

if TYPE_CHECKING:
    from ragmend.engine import Engine

log = logging.getLogger("ragmend.reload")

SETTLE_S = 0.1  # a changed file must stay unchanged this long before it is read
# Server keys applied live (marked LIVE in ragmend/settings.py): auth reads them at each request,
# the watcher its poll interval.
SERVER_LIVE_KEYS = live_keys(ServerSettings, "server.")


@dataclass(frozen=True)
class ReloadResult:
    source: str  # "file" or "signal"
    ok: bool
    applied: tuple[str, ...] = ()  # dotted keys applied
    error: str | None = None


Fingerprint = tuple[int, int, str]


class ConfigReloader:
    def __init__(
        self,
        path: Path | str,
        engine: Engine,
        events: Events,
        overrides: Mapping[str, Any] | None = None,
    ):
        self.path = Path(path)
        self._engine = engine
        self._events = events
        self._overrides = dict(overrides or {})  # what the command line set: it keeps winning
        self._reload_lock = threading.Lock()  # one reload at a time (file, signal, a caller)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._signalled = False
        self._thread: threading.Thread | None = None
        self._fingerprint: Fingerprint | None = None
        self._unreadable = False
        self._previous_handler: Any = None
        self._handler_installed = False
        self.last: ReloadResult | None = None

    # --- one reload -------------------------------------------------------------------------------

    def reload(self, source: str = "file") -> ReloadResult:
        """Load the file and apply its tunable part; on any error keep the running configuration."""
        with self._reload_lock:
            try:
                new = load_settings(self.path, **self._overrides)
                if (
                    keyless(new.server)
                    and not keyless(self._engine.settings.server)
                    and not new.server.allow_open
                ):
                    raise ConfigError(
                        "server.api_keys and server.admin_keys: the file drops every key, which would "
                        "open the API; set server.allow_open: true to mean it"
                    )
                applied = self._engine.apply_tunables(new, live=SERVER_LIVE_KEYS)
            except RagmendError as e:
                # ConfigError names the key (never a value: the settings' messages quote none).
                log.error(
                    "configuration reload (%s) of %s failed, the running one is kept: %s",
                    source,
                    self.path,
                    e,
                )
                result = ReloadResult(source, False, error=str(e))
            except Exception as e:
                log.exception(
                    "configuration reload (%s) of %s failed, the running one is kept", source, self.path
                )
                result = ReloadResult(source, False, error=f"{type(e).__name__}")
            else:
                log.info(
                    "configuration reloaded (%s) from %s: %s",
                    source,
                    self.path,
                    ", ".join(applied) if applied else "no tunable change",
                )
                result = ReloadResult(source, True, tuple(applied))
            self._events.emit(ConfigChanged(source, result.ok))
            self.last = result
            return result

    def fingerprint(self) -> Fingerprint | None:
        """(mtime_ns, size, sha256) of the file; None while it cannot be read (being replaced)."""
        try:
            st = self.path.stat()
            digest = hashlib.sha256(self.path.read_bytes()).hexdigest()
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, digest)

    # --- the watch ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Start watching (and take SIGHUP when called from the main thread)."""
        if self._thread is not None:
            return
        self._fingerprint = self.fingerprint()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="ragmend-config-reload", daemon=True)
        self._thread.start()
        self.install_sighup()
        log.info("watching %s for configuration changes (and SIGHUP: %s)", self.path, self._handler_installed)

    def stop(self) -> None:
        self.uninstall_sighup()
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def _poll_s(self) -> float:
        return float(self._engine.settings.server.reload_poll_s)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self._poll_s())
            self._wake.clear()
            if self._stop.is_set():
                break
            try:
                self._check()
            except Exception:  # the watch must outlive any one failure
                log.exception("configuration watch: check failed")

    def _check(self) -> None:
        signalled, self._signalled = self._signalled, False
        current = self.fingerprint()
        if current is None:
            if not self._unreadable:
                log.warning(
                    "configuration file %s cannot be read; keeping the running configuration", self.path
                )
            self._unreadable = True
        else:
            self._unreadable = False
        changed = current is not None and current != self._fingerprint
        if not (signalled or changed):
            return
        # A file written in place (not renamed over) can be caught half-written: an empty or
        # truncated file is valid YAML with other values. Only a file that stayed the same for a
        # moment is read; otherwise the next poll looks again.
        if changed and not signalled and (self._stop.wait(SETTLE_S) or self.fingerprint() != current):
            return
        if current is not None:
            self._fingerprint = current  # a broken file is reported once, not at every poll
        self.reload("signal" if signalled else "file")

    # --- SIGHUP ------------------------------------------------------------------------------------

    def install_sighup(self) -> bool:
        """Reload on SIGHUP. Only from the main thread (Python's rule for signal handlers)."""
        sighup = getattr(signal, "SIGHUP", None)
        if sighup is None or threading.current_thread() is not threading.main_thread():
            return False
        if not self._handler_installed:
            self._previous_handler = signal.signal(sighup, self._on_sighup)
            self._handler_installed = True
        return True

    def uninstall_sighup(self) -> None:
        if self._handler_installed and threading.current_thread() is threading.main_thread():
            previous = self._previous_handler
            signal.signal(signal.SIGHUP, previous if previous is not None else signal.SIG_DFL)
            self._handler_installed = False

    def _on_sighup(self, signum: int, frame: FrameType | None) -> None:
        # A flag and a wake-up: the reload runs on the watch thread, not in the handler.
        self._signalled = True
        self._wake.set()


@contextlib.contextmanager
def watching(reloader: ConfigReloader | None) -> Iterator[None]:
    """The watch for the app's lifespan (nothing when the server has no configuration file)."""
    if reloader is None:
        yield
        return
    reloader.start()
    try:
        yield
    finally:
        reloader.stop()
