"""docs/diagnosis.md's decision tables, written from diagnosis/decision.py, so the two cannot drift
(a test checks them the way docs/configuration.md is checked).

    python -m ragmend.diagnosis.rules_doc docs/diagnosis.md          # write the tables into it
    python -m ragmend.diagnosis.rules_doc docs/diagnosis.md --check  # exit 1 if they differ
"""

from __future__ import annotations

import sys
from pathlib import Path

from ragmend.diagnosis.decision import markdown

BEGIN = "<!-- generated from diagnosis/decision.py by python -m ragmend.diagnosis.rules_doc -->\n"
END = "<!-- end of the generated tables -->\n"


def with_tables(text: str) -> str:
    """`text` with the block between BEGIN and END replaced by the tables as the code holds them."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ValueError("the document has no generated block (its BEGIN and END markers)")
    return text[: start + len(BEGIN)] + markdown() + text[end:]


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print("usage: python -m ragmend.diagnosis.rules_doc PATH [--check]", file=sys.stderr)
        return 2
    target = Path(argv[0])
    text = target.read_text()
    wanted = with_tables(text)
    if "--check" in argv[1:]:
        if wanted != text:
            print(f"{target}: the decision tables differ from the code: run without --check", file=sys.stderr)
            return 1
        return 0
    target.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
