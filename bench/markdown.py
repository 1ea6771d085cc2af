"""The one markdown-table writer of every report (reports/*.md, the NLI suite's section of docs/nli.md)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any


def markdown_table(head: Sequence[str], rows: Iterable[Sequence[Any]], align: str = "") -> list[str]:
    """The lines of a GitHub markdown table: `| a | b |`, the rule, one line per row (cells by str(),
    None as "-": no figure, as where a context has no answer to count).

    `align` gives one letter per column, "l" (default) or "r" (`---:`); empty: all left.
    """
    if align and len(align) != len(head):
        raise ValueError(f"align {align!r} has {len(align)} letters for {len(head)} columns")
    rule = "".join("---:|" if a == "r" else "---|" for a in align or "l" * len(head))
    return [
        f"| {' | '.join(head)} |",
        "|" + rule,
        *[f"| {' | '.join('-' if c is None else str(c) for c in row)} |" for row in rows],
    ]
