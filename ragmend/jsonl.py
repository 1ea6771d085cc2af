"""Reading JSONL that a person wrote: one JSON object a line, a bad line named by its number."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from ragmend.errors import InputError


def numbered_objects(
    lines: Iterable[str], where: object, expected: str
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each non-blank line's object with its line number (from 1). InputError `where:n: ...` for
    a line that is not JSON or not an object (`expected` says what a line should hold).

    >>> list(numbered_objects(['{"a": 1}', "", '{"b": 2}'], "f.jsonl", "an object"))
    [(1, {'a': 1}), (3, {'b': 2})]
    >>> list(numbered_objects(["[1]"], "f.jsonl", "an object with a text"))
    Traceback (most recent call last):
    ...
    ragmend.errors.InputError: f.jsonl:1: not a JSON object (each line: an object with a text)
    """
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise InputError(f"{where}:{n}: not valid JSON ({e.msg})") from None
        except RecursionError:
            raise InputError(f"{where}:{n}: JSON nested too deeply") from None
        if not isinstance(row, dict):
            raise InputError(f"{where}:{n}: not a JSON object (each line: {expected})")
        yield n, row
