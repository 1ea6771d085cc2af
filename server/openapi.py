"""The published OpenAPI document of the HTTP API, checked in as docs/openapi.json.

    python -m ragmend.server.openapi              # (re)write docs/openapi.json
    python -m ragmend.server.openapi --check      # exit 1 when the file differs from the app's
    python -m ragmend.server.openapi PATH         # write (or --check) another file

Run from the repository root. The document is the app's own (/openapi.json), built from the
models of schemas.py and openai_schemas.py, with keys sorted and a fixed indent so that the same
code always writes the same bytes; it does not depend on the settings or on loaded models.
tests/test_openapi.py fails when the app's document and the file differ: a change to the HTTP
contract is made on purpose, by running this command and committing the file with it.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from ragmend.fileio import atomic_write_text

DEFAULT_PATH = Path("docs/openapi.json")


def document() -> dict[str, Any]:
    """The app's OpenAPI document, from an app that loads nothing (default settings, a scratch
    data directory that stays empty)."""
    from ragmend.server.app import create_app
    from ragmend.settings import Settings

    with tempfile.TemporaryDirectory(prefix="ragmend-openapi-") as data_dir:
        app = create_app(Settings(data_dir=Path(data_dir)), load_on_start=False)
        return app.openapi()


def render(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ragmend.server.openapi", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument("path", nargs="?", type=Path, default=DEFAULT_PATH, help="default: %(default)s")
    parser.add_argument("--check", action="store_true", help="compare only; exit 1 when they differ")
    args = parser.parse_args(argv)
    text = render(document())
    if args.check:
        current = args.path.read_text(encoding="utf-8") if args.path.exists() else None
        if current != text:
            print(f"{args.path} is not the app's OpenAPI document: run python -m ragmend.server.openapi")
            return 1
        print(f"{args.path} is up to date")
        return 0
    atomic_write_text(args.path, text)
    print(f"wrote {args.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
