"""Validation of user text shared by the CLI and the server."""

from __future__ import annotations

from ragmend.errors import InputError


def validate_query(query: object, max_chars: int) -> str:
    if not isinstance(query, str):
        raise InputError("query must be a string")
    q = query.strip()
    if not q:
        raise InputError("query is empty")
    if len(q) > max_chars:
        raise InputError(
            f"query is {len(q)} characters, over the maximum of {max_chars} (rag.max_query_chars)"
        )
    return q
