"""Bearer-key authentication of the HTTP API: an ASGI middleware that checks every request by path.

Scopes, by path (deny by default: a route someone adds later is a user route unless listed here):
  open     /healthz, /readyz, /docs, /redoc, /openapi.json; /metrics when it is not protected
  admin    /admin and everything under it: a key of server.admin_keys. None configured: the admin
           endpoints are disabled (403 saying to configure server.admin_keys).
  metrics  /metrics, protected whenever any key is configured (server.protect_metrics: null) or
           when protect_metrics says so: a key of server.metrics_keys (the scrape key, which opens
           nothing else) or server.admin_keys, or an API key that reads every collection (the
           metrics name every collection).
  user     everything else (/v1/* whoever adds it): a key of server.api_keys or server.admin_keys;
           with no key configured at all, open (the embedded laptop default), but only to
           requests addressed to the loopback unless server.allow_open.

Which collections a request may read is `reads_of`, the one place that decides it: an admin key
every one, an API key those server.key_collections lists for its fingerprint (unlisted: every
one, or none under server.deny_unlisted_keys), a keyless server's callers every one. The routes
ask it through `Caller.reads` (server/served_models.py), and a collection a key may not read is
the same 404 as one that does not exist.

What a request let through may do beyond its scope follows from its `Caller`: a vote counts only
from the key that received the answer (a fingerprint of the key is kept with it, never the key;
on a keyless server, only from the server's own machine), and only an admin key (or a keyless
server's own machine) reads the policy's internals in a reply (server.show_policy_internals shows
them to every key).

A key travels as `Authorization: Bearer <key>`. 401 with `WWW-Authenticate: Bearer` for a missing
or unknown key, 403 for a valid key without the scope; both in the app's JSON error shape
(errors.py: types authentication_error and permission_error) and counted as
ragmend_errors_total{kind="auth"}. Keys are compared in constant time against every configured
key (hmac.compare_digest, no early exit) and never logged: they are SecretStr in the settings,
and neither this module nor uvicorn's access log writes request headers. The keys are read from
the current settings at each request, so a hot reload rotates them.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import SecretStr
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from ragmend.server.errors import error_response
from ragmend.settings import ServerSettings, key_fingerprint

log = logging.getLogger("ragmend.auth")

AuthScope = Literal["open", "user", "admin", "metrics"]
OPEN_PATHS = frozenset({"/healthz", "/readyz", "/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json"})
ADMIN_PREFIX = "/admin"
METRICS_PATH = "/metrics"


def scope_of(path: str, protect_metrics: bool) -> AuthScope:
    """The scope a request path needs (module docstring)."""
    if path in OPEN_PATHS:
        return "open"
    if path == METRICS_PATH:
        return "metrics" if protect_metrics else "open"
    if path == ADMIN_PREFIX or path.startswith(ADMIN_PREFIX + "/"):
        return "admin"
    return "user"


def bearer_token(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header (scheme case-insensitive)."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


def matches(token: str, keys: Sequence[SecretStr]) -> bool:
    """Whether `token` is one of `keys`: every key is compared, in constant time, whatever matched."""
    given = token.encode("utf-8")
    found = False
    for key in keys:
        found |= hmac.compare_digest(given, key.get_secret_value().encode("utf-8"))
    return found


@dataclass(frozen=True)
class Refusal:
    status: int  # 401 or 403
    message: str


LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})


def keyless(server: ServerSettings) -> bool:
    return not (server.api_keys or server.admin_keys)


def metrics_protected(server: ServerSettings) -> bool:
    """Whether /metrics needs a key: as server.protect_metrics says, else whenever any key is
    configured (a keyless server serves it only to the loopback anyway)."""
    if server.protect_metrics is not None:
        return server.protect_metrics
    return bool(server.api_keys or server.admin_keys or server.metrics_keys)


@dataclass(frozen=True)
class Reads:
    """The collections one caller may read (the default corpus is `default`); None: every one."""

    only: frozenset[str] | None = None

    def may_read(self, collection: str) -> bool:
        return self.only is None or collection in self.only

    @property
    def everything(self) -> bool:
        return self.only is None


EVERY = Reads()
NOTHING = Reads(frozenset())


def reads_of(server: ServerSettings, token: str | None) -> Reads:
    """What a request with `token` (None: no key sent) may read: the one decision of collection
    ownership, which every route that names a collection and /metrics ask (module docstring)."""
    if keyless(server):
        return EVERY
    if token is None:
        return NOTHING
    admin, user = matches(token, server.admin_keys), matches(token, server.api_keys)
    if admin:
        return EVERY
    if not user:  # a scrape key, or no key at all, reads no collection
        return NOTHING
    fingerprint = key_fingerprint(token)
    for owner in server.key_collections:
        if hmac.compare_digest(owner.fingerprint, fingerprint):
            return Reads(frozenset(owner.collections))
    return NOTHING if server.deny_unlisted_keys else EVERY


def exposure_problem(host: str, server: ServerSettings) -> str | None:
    """Why a server must not start on `host` as configured: keyless on an address other than the
    loopback, unless server.allow_open says so (then the caller warns)."""
    if host in LOOPBACK_HOSTS or not keyless(server) or server.allow_open:
        return None
    return (
        f"refusing to serve without keys on {host}: anyone who reaches it may read the corpus and "
        "steer the shared policy; set server.api_keys (RAGMEND_SERVER__API_KEYS='[\"<key>\"]'), or "
        "server.allow_open: true to serve it open anyway"
    )


def _addressed_to_loopback(host_header: str | None) -> bool:
    """Whether a request's Host names the loopback (a name with an optional port)."""
    if not host_header:
        return False
    name = host_header.strip().lower()
    if name.startswith("["):  # [::1]:8000
        name = name[1 : name.find("]")] if "]" in name else name
    else:
        name = name.rsplit(":", 1)[0]
    return name in LOOPBACK_HOSTS


def check(
    server: ServerSettings, path: str, authorization: str | None, host_header: str | None = "localhost"
) -> Refusal | None:
    """None when the request may go on, else why not. A keyless server (not allow_open) answers
    only requests addressed to the loopback: a web page that rebinds its own name to 127.0.0.1
    sends its name as the Host, and must not read the corpus."""
    scope = scope_of(path, metrics_protected(server))
    if keyless(server) and not server.allow_open and not _addressed_to_loopback(host_header):
        return Refusal(403, "this server has no keys and answers only requests addressed to localhost")
    if scope == "open" or (scope == "user" and keyless(server)):
        return None
    if scope == "admin" and not server.admin_keys:
        return Refusal(403, "the admin endpoints are disabled: configure server.admin_keys to enable them")
    if scope == "metrics" and not (server.api_keys or server.admin_keys or server.metrics_keys):
        return Refusal(
            403,
            "server.protect_metrics is on but no key is configured: set server.metrics_keys or admin_keys",
        )
    token = bearer_token(authorization)
    if token is None:
        return Refusal(401, "an API key is required: send it as 'Authorization: Bearer <key>'")
    return _admitted(server, scope, token, held(server, token))


@dataclass(frozen=True)
class Held:
    """Which key lists a token is in: every list compared, so no timing tells which matched."""

    admin: bool
    user: bool
    metrics: bool

    @property
    def any(self) -> bool:
        return self.admin or self.user or self.metrics


def held(server: ServerSettings, token: str) -> Held:
    return Held(
        admin=matches(token, server.admin_keys),
        user=matches(token, server.api_keys),
        metrics=matches(token, server.metrics_keys),
    )


def _admitted(server: ServerSettings, scope: AuthScope, token: str, keys: Held) -> Refusal | None:
    """A known key in its scope: None; a known key outside it: 403 naming what it lacks; else 401."""
    if not keys.any:
        return Refusal(401, "invalid API key")
    if keys.admin:
        return None
    if scope == "admin":
        return Refusal(403, "this key may not use the admin endpoints (an admin key is required)")
    if scope == "user":
        return None if keys.user else Refusal(403, "this key is a scrape key: it opens /metrics only")
    if keys.metrics or reads_of(server, token).everything:
        return None
    return Refusal(
        403,
        "this key reads only some collections, and /metrics names them all: use a key of server.metrics_keys",
    )


@dataclass(frozen=True)
class Caller:
    """Who sent a request that auth let through: what a vote is tied to, and what it may read."""

    # A key's fingerprint ("key:<hash>", never the key); on a keyless server "local" for a client
    # on the server's own machine, "remote" for any other (allow_open).
    identity: str
    admin: bool  # the key is one of server.admin_keys
    reads: Reads = NOTHING  # the collections it may read (reads_of)

    @property
    def may_vote(self) -> bool:
        return self.identity != "remote"

    @property
    def owner(self) -> bool:
        """An admin key, or a keyless server's own machine: who may read the policy's internals."""
        return self.admin or self.identity == "local"


def fingerprint(token: str) -> str:
    """What the stores keep of a key: a SHA-256 of it, from which the key cannot be read back."""
    return key_fingerprint(token)


def loopback_client(host: str | None) -> bool:
    """Whether a client address is the loopback (127.0.0.0/8, ::1, or IPv4 mapped into IPv6)."""
    try:
        address = ipaddress.ip_address(host or "")
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return bool(address.is_loopback or (mapped is not None and mapped.is_loopback))


def caller(server: ServerSettings, authorization: str | None, client_host: str | None) -> Caller:
    """The caller of a request `check` let through: its key's fingerprint and whether the key is an
    admin's; a keyless server tells its own machine from the others by the client's address."""
    if keyless(server):
        return Caller("local" if loopback_client(client_host) else "remote", admin=False, reads=EVERY)
    token = bearer_token(authorization)
    if token is None:  # an open path: nothing to vote with, nothing to read
        return Caller("remote", admin=False)
    admin = matches(token, server.admin_keys)
    return Caller(fingerprint(token), admin=admin, reads=reads_of(server, token))


def caller_of(request: Request, server: ServerSettings) -> Caller:
    """The caller of a request the middleware let through (its key, or its address when keyless)."""
    host = request.client.host if request.client else None
    return caller(server, request.headers.get("authorization"), host)


class BearerAuth:
    """The ASGI middleware: `check` before the app sees the request (and before a body is read)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        server_settings: Callable[[], ServerSettings],
        on_refusal: Callable[[int], None] | None = None,
    ):
        self.app = app
        self._server_settings = server_settings
        self._on_refusal = on_refusal or (lambda status: None)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        root = scope.get("root_path") or ""
        if root and path.startswith(root):
            path = path[len(root) :] or "/"
        sent = Headers(scope=scope)
        refusal = check(self._server_settings(), path, sent.get("authorization"), sent.get("host"))
        if refusal is None:
            await self.app(scope, receive, send)
            return
        self._on_refusal(refusal.status)
        # Path and reason only: never a header.
        request_line = f"{scope.get('method', 'WS')} {path}"
        log.info("auth: %d for %s: %s", refusal.status, request_line, refusal.message)
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        headers = {"WWW-Authenticate": 'Bearer realm="ragmend"'} if refusal.status == 401 else None
        await error_response(refusal.status, refusal.message, headers=headers)(scope, receive, send)
