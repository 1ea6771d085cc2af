"""The admin API (/admin/*): read and tune the repair policy, move its learned state, refresh the
index, read the effective configuration. server/auth.py requires an admin key for all of it.

Changes are applied live (Engine.change_policy -> Engine.apply_tunables, the hot reload's path)
and logged on "ragmend.admin" (never a key) and counted in
ragmend_config_changes_total{source="admin"}. They are not written to the configuration file: the
file wins at its next reload (docs/operations.md). Work that touches the policy's store or the
index runs in a worker thread, never on the event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

from anyio import to_thread
from fastapi import APIRouter, Body
from pydantic import BaseModel, ConfigDict, Field, create_model

from ragmend.errors import ConfigError, InputError, RagmendError
from ragmend.instrumentation import Events
from ragmend.policy.facade import LIVE_POLICY_KEYS
from ragmend.server.events import ConfigChanged
from ragmend.server.mapping import index_refresh, policy_change, policy_view
from ragmend.server.schemas import ConfigView, IndexRefresh, PolicyChange, PolicyView
from ragmend.server.state import ConfigFileDep, EngineDep, EventsDep
from ragmend.settings import PolicySettings

log = logging.getLogger("ragmend.admin")
T = TypeVar("T")

# PATCH /admin/policy takes the policy's live keys, each with PolicySettings' own type and constraints.
PATCHABLE = LIVE_POLICY_KEYS


def _optional(name: str) -> tuple[Any, Any]:
    field = PolicySettings.model_fields[name]
    annotation: Any = Annotated[(field.annotation, *field.metadata)] if field.metadata else field.annotation
    if name == "learn":  # the mode's names too
        annotation = bool | Literal["learn", "frozen"]
    return (annotation | None, Field(None))


PolicyPatch: type[BaseModel] = create_model(  # type: ignore[call-overload]
    "PolicyPatch",
    __config__=ConfigDict(extra="forbid"),
    __doc__="Any of the policy's tunable settings (the others need a restart).",
    **{name: _optional(name) for name in PATCHABLE},
)


def admin_change(events: Events, what: str, fn: Callable[[], T]) -> T:
    """Run one admin change: logged and told (ConfigChanged), whether it worked or not."""
    try:
        result = fn()
    except RagmendError as e:
        events.emit(ConfigChanged("admin", False))
        log.warning("admin: %s refused: %s", what, e)
        if isinstance(e, ConfigError):  # an invalid value in the request: the caller's to fix
            raise InputError(str(e)) from None
        raise
    events.emit(ConfigChanged("admin", True))
    return result


router = APIRouter(prefix="/admin", tags=["admin"])


@router.get("/policy", summary="The repair policy: settings in force and per-arm statistics")
async def get_policy(engine: EngineDep) -> PolicyView:
    # Off the loop: the policy's lock may be held for an update's fsync.
    return await to_thread.run_sync(policy_view, engine)


@router.patch("/policy", summary="Change the policy's tunable settings at runtime")
async def patch_policy(body: PolicyPatch, engine: EngineDep, events: EventsDep) -> PolicyChange:
    # An explicit null is no change: no patchable setting takes None (a null went on to the
    # policy as a value and failed there with a 500; found by tests/test_schemathesis.py).
    changes = body.model_dump(exclude_unset=True, exclude_none=True)
    if not changes:
        raise InputError(f"nothing to change; send any of {', '.join(PATCHABLE)}")
    if isinstance(changes.get("learn"), str):
        changes["learn"] = changes["learn"] == "learn"
    if "enabled_actions" in changes:
        changes["enabled_actions"] = tuple(changes["enabled_actions"])

    def apply() -> PolicyChange:
        kind = changes.get("kind", engine.policy.kind)
        if "alpha" in changes and kind != "linucb":
            raise ConfigError(f"alpha: applies to the linucb policy; this one is {kind} (set kind too)")
        applied = engine.change_policy(changes)
        cfg = engine.settings.policy
        now = [f"{k}={getattr(cfg, k.removeprefix('policy.'))!r}" for k in applied]
        log.info("admin: policy changed: %s", ", ".join(now) or "nothing (already so)")
        return policy_change(engine, applied)

    return await to_thread.run_sync(admin_change, events, "policy change", apply)


@router.get("/policy/export", summary="The learned state as versioned JSON")
async def export_policy(engine: EngineDep) -> dict[str, Any]:
    return await to_thread.run_sync(lambda: engine.policy.export_state())


@router.post("/policy/import", summary="Replace the learned state with an export")
async def import_policy(
    data: Annotated[dict[str, Any], Body()], engine: EngineDep, events: EventsDep
) -> PolicyView:
    def apply() -> PolicyView:
        engine.policy.import_state(data)  # InputError (400) naming what does not fit
        pulls = {a: s.pulls for a, s in engine.policy.stats().items()}
        log.info("admin: policy state imported (%d updates)", sum(pulls.values()))
        return policy_view(engine)

    return await to_thread.run_sync(admin_change, events, "policy import", apply)


@router.post("/policy/reset", summary="Forget everything the policy learned")
async def reset_policy(engine: EngineDep, events: EventsDep) -> PolicyView:
    def apply() -> PolicyView:
        forgotten = sum(s.pulls for s in engine.policy.stats().values())
        engine.policy.reset()
        log.info("admin: policy state reset (%d updates forgotten)", forgotten)
        return policy_view(engine)

    return await to_thread.run_sync(admin_change, events, "policy reset", apply)


@router.post("/index/refresh", summary="Re-ingest the configured sources (the index_refresh action)")
async def refresh_index(engine: EngineDep) -> IndexRefresh:
    report = await to_thread.run_sync(engine.corpus.refresh_index)
    log.info("admin: index refreshed to %s", report.generation)
    return index_refresh(report)


@router.get("/config", summary="The effective configuration (secrets redacted)")
async def get_config(engine: EngineDep, config_file: ConfigFileDep) -> ConfigView:
    settings = engine.settings
    # mode="json" writes every SecretStr (server keys, the generator's api_key) as **********.
    return ConfigView(
        config_file=str(config_file) if config_file else None, settings=settings.model_dump(mode="json")
    )
