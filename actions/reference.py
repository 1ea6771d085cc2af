"""docs/repair.md's table of the repair actions, written from the catalogue (actions/catalogue.py),
so the page lists every action the policy can choose, with what it does and its prior cost.

    python -m ragmend.actions.reference docs/repair.md          # write the table into it
    python -m ragmend.actions.reference docs/repair.md --check  # exit 1 if it differs
"""

from __future__ import annotations

import sys

from ragmend.actions.catalogue import ACTIONS, Action
from ragmend.budgets import MB
from ragmend.generated_docs import with_block, write_or_check

BEGIN = "<!-- generated from actions/catalogue.py by python -m ragmend.actions.reference -->\n"
END = "<!-- end of the generated table -->\n"


def prior_cost(action: Action) -> str:
    """Its prior extra cost as the table says it: seconds, then megabytes where it has some."""
    parts = [f"{action.prior_latency_s:g} s"] if action.prior_latency_s else []
    if action.prior_memory_bytes:
        parts.append(f"{action.prior_memory_bytes / MB:g} MB")
    return ", ".join(parts) or "0"


def markdown() -> str:
    """The table, one row per action in the catalogue's order."""
    rows = ["| action | what it does | prior extra cost |", "|---|---|---|"]
    rows += [f"| {a.name} | {a.does} | {prior_cost(a)} |" for a in ACTIONS]
    return "\n".join(rows) + "\n"


def with_table(text: str) -> str:
    """`text` with the block between BEGIN and END replaced by the table as the catalogue holds it."""
    return with_block(text, BEGIN, END, markdown())


if __name__ == "__main__":
    sys.exit(write_or_check(sys.argv[1:], "ragmend.actions.reference", with_table))
