"""A doc's generated block: the text between two marker lines, written from the code, and the
command that writes it or checks that the doc still says what the code holds."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path


def with_block(text: str, begin: str, end: str, block: str) -> str:
    """`text` with what lies between the `begin` and `end` lines replaced by `block`."""
    start, stop = text.find(begin), text.find(end)
    if start < 0 or stop < start:
        raise ValueError("the document has no generated block (its BEGIN and END markers)")
    return text[: start + len(begin)] + block + text[stop:]


def write_or_check(argv: list[str], module: str, rewrite: Callable[[str], str]) -> int:
    """`python -m MODULE PATH [--check]`: write the generated block into PATH, or with --check exit
    1 where it differs from the code (2: no path given)."""
    if not argv or argv[0].startswith("-"):
        print(f"usage: python -m {module} PATH [--check]", file=sys.stderr)
        return 2
    target = Path(argv[0])
    text = target.read_text()
    wanted = rewrite(text)
    if "--check" in argv[1:]:
        if wanted != text:
            print(
                f"{target}: the generated block differs from the code: run without --check", file=sys.stderr
            )
            return 1
        return 0
    target.write_text(wanted)
    return 0
