"""The configuration reference, read from the settings model: every key with its type, default,
range, whether it changes while the server runs, its environment variable and its description.
docs/configuration.md is this module's output, checked by a test the way docs/openapi.json is.

    python -m ragmend.settings_reference docs/configuration.md          # write it
    python -m ragmend.settings_reference docs/configuration.md --check  # exit 1 if it differs
"""

from __future__ import annotations

import json
import sys
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import annotated_types
from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from ragmend.settings import LIVE, CollectionSettings, Settings

ENV_PREFIX = "RAGMEND_"
ENV_DELIMITER = "__"
# A bound's constraint type, the attribute holding its value, and its sign.
_BOUNDS = (
    (annotated_types.Ge, "ge", ">="),
    (annotated_types.Gt, "gt", ">"),
    (annotated_types.Le, "le", "<="),
    (annotated_types.Lt, "lt", "<"),
)


@dataclass(frozen=True, kw_only=True)
class Key:
    """One setting: its dotted key and what the reference says of it."""

    key: str
    type: str
    default: str
    range: str
    live: bool
    description: str

    @property
    def env(self) -> str:
        return env_var(self.key)


def env_var(key: str) -> str:
    """The environment variable of a dotted key (RAGMEND_RAG__K for rag.k)."""
    return ENV_PREFIX + key.replace(".", ENV_DELIMITER).upper()


Section = tuple[str, type[BaseModel], BaseModel | None]


def sections(
    model: type[BaseModel] = Settings, prefix: str = "", default: BaseModel | None = None
) -> Iterator[Section]:
    """(dotted prefix, section model, its default value) of every section, the top level first;
    the default value is the parent's (models.escalation's is the large profile, not the model's)."""
    yield prefix, model, default
    for name, field in model.model_fields.items():
        section = _section_of(field.annotation)
        if section is not None:
            value = field.default if isinstance(field.default, BaseModel) else None
            yield from sections(section, f"{prefix}{name}.", value)
        elif _collection_map(field.annotation):
            yield from sections(CollectionSettings, f"{prefix}{name}.<name>.")


def keys(model: type[BaseModel], prefix: str = "", default: BaseModel | None = None) -> list[Key]:
    """The leaf settings of one section (its sub-sections are sections of their own; one that may
    be null is a key too, for what null means)."""
    out = []
    for name, field in model.model_fields.items():
        if _collection_map(field.annotation) or (
            _section_of(field.annotation) is not None and not _nullable(field.annotation)
        ):
            continue
        value = getattr(default, name) if default is not None else _field_default(field)
        out.append(
            Key(
                key=prefix + name,
                type=type_name(field.annotation),
                default=_shown(value),
                range=_range(field),
                live=LIVE in field.metadata,
                description=field.description or "",
            )
        )
    return out


def type_name(annotation: Any) -> str:
    """A reader's name for a field's type: `int`, `one of: a, b`, `list of str`, `path or null`."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Annotated:
        return type_name(args[0])
    if origin is Literal:
        return "one of: " + ", ".join(str(a) for a in args)
    if origin in (types.UnionType, typing.Union):
        named = [type_name(a) for a in args if a is not type(None)]
        return " or ".join(named) + (" or null" if type(None) in args else "")
    if origin is tuple and isinstance(args[0], type) and issubclass(args[0], BaseModel):
        return "list of {" + ", ".join(args[0].model_fields) + "}"  # records, not sections
    if origin is tuple:
        return f"list of {type_name(args[0])}"
    if annotation is SecretStr:
        return "secret"
    if annotation is Path:
        return "path"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "section"
    return getattr(annotation, "__name__", str(annotation))


def _section_of(annotation: Any) -> type[BaseModel] | None:
    """The section model of a field (also of one that may be null), or None for a plain value."""
    for t in typing.get_args(annotation) if _nullable(annotation) else (annotation,):
        if isinstance(t, type) and issubclass(t, BaseModel):
            return t
    return None


def _nullable(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    return origin in (types.UnionType, typing.Union) and type(None) in typing.get_args(annotation)


def _collection_map(annotation: Any) -> bool:
    return typing.get_origin(annotation) is dict


_COMPUTED = object()  # a default computed at start (data_dir, cache_dir: from XDG variables)


def _field_default(field: FieldInfo) -> Any:
    return _COMPUTED if field.default_factory is not None else field.default


def _shown(value: Any) -> str:
    if value is _COMPUTED:
        return "computed"
    if value is PydanticUndefined:
        return "required"
    if isinstance(value, BaseModel):
        return "the section below"  # a section that may be null (models.escalation)
    if isinstance(value, tuple):
        value = [str(v) if isinstance(v, Path) else v for v in value]
    if isinstance(value, Path):
        value = str(value)
    return json.dumps(value)


def _range(field: FieldInfo) -> str:
    return ", ".join(
        f"{sign} {getattr(m, attr)}"
        for m in field.metadata
        for kind, attr, sign in _BOUNDS
        if isinstance(m, kind)
    )


def markdown() -> str:
    """docs/configuration.md."""
    lines = [
        "# Configuration reference",
        "",
        "Generated from ragmend/settings.py by `python -m ragmend.settings_reference "
        "docs/configuration.md`; a test checks that it is current. Values come from, highest first: "
        "command-line flags, the environment (`RAGMEND_<SECTION>__<KEY>`, JSON for lists), the YAML "
        "file (`--config` or `$RAGMEND_CONFIG`), the defaults below; `ragmend config show` prints the "
        "effective configuration and where each value came from. *live*: applied while the server "
        "runs (the configuration file's hot reload, and the admin API for the policy); every other "
        "key is read at start. deploy/ragmend.example.yaml is a commented example.",
        "",
    ]
    for prefix, model, default in sections():
        rows = keys(model, prefix, default)
        if not rows:
            continue
        title = prefix.rstrip(".") or "top level"
        doc = " ".join((model.__doc__ or "").split()) if prefix else ""
        lines += [f"## `{title}`", ""]
        if doc:
            lines += [doc, ""]
        lines += ["| key | type | default | range | live | description |", "|---|---|---|---|---|---|"]
        for k in rows:
            cells = [
                f"`{k.key}`<br>`{k.env}`",
                k.type,
                f"`{k.default}`",
                k.range,
                "yes" if k.live else "",
                k.description,
            ]
            cells[-1] = _cell(cells[-1])
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        lines.append("")
    return "\n".join(lines)


def _cell(text: str) -> str:
    """A description cell: outside code spans, no < or > an HTML reader takes for a tag."""
    parts = text.split("`")
    return "`".join(p if i % 2 else p.replace("<", "&lt;").replace(">", "&gt;") for i, p in enumerate(parts))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    check = "--check" in args
    paths = [a for a in args if a != "--check"]
    if len(paths) != 1:
        print("usage: python -m ragmend.settings_reference PATH [--check]", file=sys.stderr)
        return 2
    target, text = Path(paths[0]), markdown()
    if check:
        current = target.read_text(encoding="utf-8") if target.exists() else ""
        if current != text:
            print(
                f"{target} is not the settings' reference: run python -m ragmend.settings_reference {target}"
            )
            return 1
        return 0
    target.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
