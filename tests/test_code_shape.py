"""The product's code reads without counting: no call passes more than four arguments by position
(a fifth is named, so a reader and a reviewer see which value goes where), the rows and headers of
a CLI table aside; no class has more than twenty public methods (one that does holds several
concerns, each of which is better an object of its own). Read from the source with `ast`, over
the product's parts (the lab's, bench/, train/ and corpora/, are evaluation code)."""

from __future__ import annotations

import ast
from collections.abc import Callable

from tests.conftest import REPO
from tests.test_layout import CORE, _modules

PRODUCT = (CORE, "rag", "kg", "diagnosis", "policy", "actions", "engine", "server", "integrations", "cli")
MAX_POSITIONAL = 4
# rich's Table(*columns) and add_row(*cells): a table's columns, one value per column by design.
TABLE_CALLS = frozenset({"Table", "add_row"})
MAX_PUBLIC_METHODS = 20


def product_hits(check: Callable[[str, str], list[str]]) -> list[str]:
    """What `check` finds in each module of the product's parts."""
    return [
        hit
        for part in PRODUCT
        for path in _modules(part)
        for hit in check(path.read_text(), str(path.relative_to(REPO)))
    ]


def wide_positional_calls(source: str, name: str) -> list[str]:
    """`name:line callee(n positional)` of each call in `source` passing more than MAX_POSITIONAL
    arguments by position."""
    out = []
    for node in ast.walk(ast.parse(source, name)):
        if not isinstance(node, ast.Call):
            continue
        positional = [a for a in node.args if not isinstance(a, ast.Starred)]
        callee = ast.unparse(node.func)
        if len(positional) > MAX_POSITIONAL and callee.split(".")[-1] not in TABLE_CALLS:
            out.append(f"{name}:{node.lineno} {callee}({len(positional)} positional)")
    return out


def test_the_check_sees_a_wide_call() -> None:
    source = "f(1, 2, 3, 4, 5)\nf(1, 2, 3, 4, e=5)\nf(*xs)\nt.add_row('a', 'b', 'c', 'd', 'e')\n"
    assert wide_positional_calls(source, "sample.py") == ["sample.py:1 f(5 positional)"]


def test_no_product_call_passes_more_than_four_arguments_by_position() -> None:
    wide = product_hits(wide_positional_calls)
    assert not wide, "name the fifth argument onwards:\n" + "\n".join(wide)


def wide_classes(source: str, name: str) -> list[str]:
    """`name:line Class(n public methods)` of each class in `source` defining more than
    MAX_PUBLIC_METHODS methods (properties and class methods included) whose names do not start
    with an underscore."""
    out = []
    for node in ast.walk(ast.parse(source, name)):
        if not isinstance(node, ast.ClassDef):
            continue
        public = [
            m.name
            for m in node.body
            if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and not m.name.startswith("_")
        ]
        if len(public) > MAX_PUBLIC_METHODS:
            out.append(f"{name}:{node.lineno} {node.name}({len(public)} public methods)")
    return out


def test_the_check_sees_a_wide_class() -> None:
    methods = "".join(f"    def m{i}(self): ...\n" for i in range(MAX_PUBLIC_METHODS + 1))
    source = f"class Wide:\n{methods}    def _private(self): ...\nclass Narrow:\n    def m(self): ...\n"
    assert wide_classes(source, "sample.py") == [f"sample.py:1 Wide({MAX_PUBLIC_METHODS + 1} public methods)"]


def test_no_product_class_has_more_than_twenty_public_methods() -> None:
    wide = product_hits(wide_classes)
    assert not wide, "split the class by concern:\n" + "\n".join(wide)
