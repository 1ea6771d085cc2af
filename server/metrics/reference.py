"""docs/metrics.md's table of every series, written from the declarations (server/metrics/declared.py),
so the page and what `/metrics` exports cannot drift (a test checks them the way
docs/configuration.md is checked).

    python -m ragmend.server.metrics.reference docs/metrics.md          # write the table into it
    python -m ragmend.server.metrics.reference docs/metrics.md --check  # exit 1 if it differs
"""

from __future__ import annotations

import sys
from pathlib import Path

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
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ValueError("the document has no generated block (its BEGIN and END markers)")
    return text[: start + len(BEGIN)] + markdown() + text[end:]


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print("usage: python -m ragmend.server.metrics.reference PATH [--check]", file=sys.stderr)
        return 2
    target = Path(argv[0])
    text = target.read_text()
    wanted = with_table(text)
    if "--check" in argv[1:]:
        if wanted != text:
            print(
                f"{target}: the metrics table differs from the declarations: run without --check",
                file=sys.stderr,
            )
            return 1
        return 0
    target.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
