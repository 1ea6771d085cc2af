"""Which configuration keys a running engine applies live, and the dotted-key diff of two Settings.

Live: the settings marked LIVE in ragmend/settings.py (`live_keys`). The engine applies the policy
section's (kind, alpha, learn, enabled actions, the budgets, repair on/off, the refresh
cool-down) and the router's (on/off, plans, kind, alpha, learn); the server applies its own
(keys, /metrics protection, the reload poll). Everything else (models, index, RAG defaults,
diagnosis, data paths, ...) is read once when the engine builds the object that uses it, so a
change there needs a restart; `Engine.apply_tunables` names those keys in a warning and keeps
their running values.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ragmend.settings import PolicySettings, RouterSettings, Settings, live_keys, settings_with

ENGINE_LIVE_KEYS: tuple[str, ...] = live_keys(PolicySettings, "policy.") + live_keys(
    RouterSettings, "router."
)


def _flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_flatten(value, dotted + "."))
        else:
            out[dotted] = value
    return out


def changed_keys(old: Settings, new: Settings) -> list[str]:
    """The dotted keys whose values differ (secrets compare by value and are never returned)."""
    # Python-mode dump keeps SecretStr objects, which compare by their secret value.
    a, b = _flatten(old.model_dump()), _flatten(new.model_dump())
    return sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))


def with_keys(base: Settings, source: Settings, keys: Iterable[str]) -> Settings:
    """`base` with the values of `keys` (dotted) taken from `source`, validated again."""
    values = _flatten(source.model_dump())
    sections: dict[str, Any] = {}
    for key in keys:
        *parents, leaf = key.split(".")
        node = sections
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = values[key]
    return settings_with(base, **sections)
