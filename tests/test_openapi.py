"""The HTTP contract is its own schema: the published OpenAPI document (docs/openapi.json) is the
app's, and the response models embed no internal type, so an internal rename cannot change it
(server/schemas.py, server/mapping.py)."""

from __future__ import annotations

import json
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ragmend.server import openai_schemas, schemas
from ragmend.server.openapi import document, render
from tests.conftest import REPO

PUBLISHED = REPO / "docs" / "openapi.json"
REGENERATE = "python -m ragmend.server.openapi  (from the repository root), then commit docs/openapi.json"


def changed(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """The paths and components that differ, for the failure message."""
    out = []
    for section, key in (("paths", None), ("components", "schemas")):
        a = old.get(section, {}) if key is None else old.get(section, {}).get(key, {})
        b = new.get(section, {}) if key is None else new.get(section, {}).get(key, {})
        out += [f"{section} {name}" for name in sorted(set(a) | set(b)) if a.get(name) != b.get(name)]
    rest = {k for k in set(old) | set(new) if k not in ("paths", "components") and old.get(k) != new.get(k)}
    return out + sorted(rest)


def test_the_published_openapi_document_is_the_apps() -> None:
    current = render(document())
    assert PUBLISHED.exists(), f"{PUBLISHED} is missing: {REGENERATE}"
    published = PUBLISHED.read_text(encoding="utf-8")
    if published != current:
        what = changed(json.loads(published), json.loads(current)) or ["formatting"]
        raise AssertionError(
            f"the HTTP contract changed: docs/openapi.json differs from the app's document in "
            f"{', '.join(what)}. If the change is intended: {REGENERATE}"
        )


def test_the_document_is_written_deterministically(tmp_path: Path) -> None:
    from ragmend.server.openapi import main

    target = tmp_path / "openapi.json"
    assert main([str(target)]) == 0 and main([str(target), "--check"]) == 0
    first = target.read_bytes()
    assert main([str(target)]) == 0 and target.read_bytes() == first
    assert list(json.loads(first)) == sorted(json.loads(first))  # keys sorted
    target.write_text("{}\n")
    assert main([str(target), "--check"]) == 1


def classes_in(annotation: Any) -> set[type]:
    """Every class an annotation names (through unions, containers and Annotated)."""
    if annotation is Any or annotation is None or annotation is type(None):
        return set()
    if isinstance(annotation, type) and not typing.get_args(annotation):
        return {annotation}
    if typing.get_origin(annotation) is typing.Literal:
        return set()
    if typing.get_origin(annotation) is typing.Annotated:  # the type, not its constraints
        return classes_in(typing.get_args(annotation)[0])
    found: set[type] = set()
    origin = typing.get_origin(annotation)
    if isinstance(origin, type) and origin is not types.UnionType:
        found.add(origin)
    for arg in typing.get_args(annotation):
        found |= classes_in(arg)
    return found


def test_the_response_models_embed_no_internal_type() -> None:
    """Every model of the contract names only builtins and the contract's own models; the domain
    reaches it only as closed vocabularies (Literal aliases) and through mapping.py."""
    models = [
        obj
        for module in (schemas, openai_schemas)
        for obj in vars(module).values()
        if isinstance(obj, type) and issubclass(obj, BaseModel) and obj.__module__ == module.__name__
    ]
    assert len(models) > 30
    for model in models:
        for name, field in model.model_fields.items():
            for cls in classes_in(field.annotation):
                allowed = cls.__module__ in ("builtins", schemas.__name__, openai_schemas.__name__)
                assert allowed, f"{model.__name__}.{name} embeds {cls.__module__}.{cls.__qualname__}"
    # What the schema modules import from the rest of ragmend: only Literal vocabularies.
    for module in (schemas, openai_schemas):
        for name, obj in vars(module).items():
            origin = getattr(obj, "__module__", "") or ""
            if origin.startswith("ragmend.") and not origin.startswith("ragmend.server"):
                assert typing.get_origin(obj) is typing.Literal, f"{module.__name__} imports {name}"
