"""docs/metrics.md's table of every series, written from the declarations (server/metrics/declared.py),
so the page and what `/metrics` exports cannot drift (a test checks them the way
docs/configuration.md is checked).

    python -m ragmend.server.metrics.reference docs/metrics.md          # write the table into it
    python -m ragmend.server.metrics.reference docs/metrics.md --check  # exit 1 if it differs
"""

from __future__ import annotations

import sys

from ragmend.generated_docs import with_block, write_or_check
from ragmend.server.metrics.declared import DECLARED, Declared, Label

BEGIN = "<!-- generated from server/metrics/declared.py by python -m ragmend.server.metrics.reference -->\n"
END = "<!-- end of the generated table -->\n"
# A label's closed set is listed whole up to this many values; a longer one by its size.
MAX_LISTED = 12
# What the exposition calls a metric, beyond its declared name (prometheus-client's suffixes).
_SUFFIX = {"info": "_info", "scraped_info": "_info"}
_TYPE = {"scraped_gauge": "gauge", "scraped_info": "info"}


def exported(d: Declared) -> str:
    return d.name + _SUFFIX.get(d.kind, "")


def _label(label: Label) -> str:
    if label.values is None:
        return f"{label.name} (bounded by the configuration)"
    if len(label.values) <= MAX_LISTED:
        return f"{label.name}: {', '.join(label.values)}"
    return f"{label.name} ({len(label.values)} values)"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def markdown() -> str:
    """The table, one row per series in declaration order."""
    rows = [
        "| metric | type | labels | what |",
        "|---|---|---|---|",
        *(
            f"| `{exported(d)}` | {_TYPE.get(d.kind, d.kind)} | {_cell('; '.join(map(_label, d.labels)))} "
            f"| {_cell(d.doc)} |"
            for d in DECLARED
        ),
    ]
    return "\n".join(rows) + "\n"


def with_table(text: str) -> str:
    """`text` with the block between BEGIN and END replaced by the table as the code declares it."""
    return with_block(text, BEGIN, END, markdown())


if __name__ == "__main__":
    sys.exit(write_or_check(sys.argv[1:], "ragmend.server.metrics.reference", with_table))
