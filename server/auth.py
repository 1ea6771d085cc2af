"""Bearer-key authentication of the HTTP API: an ASGI middleware that checks every request by path.

Scopes, by path (deny by default: a route someone adds later is a user route unless listed here):
  open     /healthz, /readyz, /docs, /redoc, /openapi.json; /metrics unless server.protect_metrics
  admin    /admin and everything under it: a key of server.admin_keys. None configured: the admin
           endpoints are disabled (403 saying to configure server.admin_keys).
  metrics  /metrics when server.protect_metrics: a key of server.api_keys or server.admin_keys.
  user     everything else (/v1/* whoever adds it): a key of server.api_keys or server.admin_keys;
           with no api_keys configured, open (the embedded laptop default).

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
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import SecretStr
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from ragmend.server.errors import error_response
from ragmend.settings import ServerSettings

log = logging.getLogger("ragmend.auth")

AuthScope = Literal["open", "user", "admin", "metrics"]
OPEN_PATHS = frozenset({"/healthz", "/readyz", "/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json"})
ADMIN_PREFIX = "/admin"


def scope_of(path: str, protect_metrics: bool) -> AuthScope:
    """The scope a request path needs (module docstring)."""
    if path in OPEN_PATHS:
        return "open"
    if path == "/metrics":
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


def check(server: ServerSettings, path: str, authorization: str | None) -> Refusal | None:
    """None when the request may go on, else why not."""
    scope = scope_of(path, server.protect_metrics)
    if scope == "open" or (scope == "user" and not server.api_keys):
        return None
    if scope == "admin" and not server.admin_keys:
        return Refusal(403, "the admin endpoints are disabled: configure server.admin_keys to enable them")
    if scope == "metrics" and not (server.api_keys or server.admin_keys):
        return Refusal(
            403, "server.protect_metrics is on but no key is configured: set server.api_keys or admin_keys"
        )
    token = bearer_token(authorization)
    if token is None:
        return Refusal(401, "an API key is required: send it as 'Authorization: Bearer <key>'")
    admin = matches(token, server.admin_keys)
    if scope == "admin":
        if admin:
            return None
        if matches(token, server.api_keys):
            return Refusal(403, "this key may not use the admin endpoints (an admin key is required)")
        return Refusal(401, "invalid API key")
    # user or metrics: any configured key. Both compared: no timing tells which list matched.
    user = matches(token, server.api_keys)
    return None if admin or user else Refusal(401, "invalid API key")


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
        refusal = check(self._server_settings(), path, Headers(scope=scope).get("authorization"))
        if refusal is None:
            await self.app(scope, receive, send)
            return
        self._on_refusal(refusal.status)
        # Path and reason only: never a header.
        log.info("auth: %d for %s %s: %s", refusal.status, scope.get("method", "WS"), path, refusal.message)
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        headers = {"WWW-Authenticate": 'Bearer realm="ragmend"'} if refusal.status == 401 else None
        await error_response(refusal.status, refusal.message, headers=headers)(scope, receive, send)
