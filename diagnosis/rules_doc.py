"""docs/diagnosis.md's decision tables, written from diagnosis/decision.py, so the two cannot drift
(a test checks them the way docs/configuration.md is checked).

    python -m ragmend.diagnosis.rules_doc docs/diagnosis.md          # write the tables into it
    python -m ragmend.diagnosis.rules_doc docs/diagnosis.md --check  # exit 1 if they differ
"""

from __future__ import annotations

import sys

from ragmend.diagnosis.decision import markdown
from ragmend.generated_docs import with_block, write_or_check

BEGIN = "<!-- generated from diagnosis/decision.py by python -m ragmend.diagnosis.rules_doc -->\n"
END = "<!-- end of the generated tables -->\n"


def with_tables(text: str) -> str:
    """`text` with the block between BEGIN and END replaced by the tables as the code holds them."""
    return with_block(text, BEGIN, END, markdown())


if __name__ == "__main__":
    sys.exit(write_or_check(sys.argv[1:], "ragmend.diagnosis.rules_doc", with_tables))
