"""The project's front door: README.md reads as a front page, and docs/index.md leads to every page.

- README.md: the two commands within its first 30 lines, no line over 120 characters (fenced code
  and table rows included), no paragraph over 12 lines, and the test command it gives is the one
  CI runs (.ci/run calls `make test`; the Makefile's `test` target runs the suite).
- docs/index.md links every Markdown page under docs/.
- Every link to a local file in README.md and docs/index.md resolves, and so does every docs page
  README.md names in backticks.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import REPO

README = REPO / "README.md"
INDEX = REPO / "docs" / "index.md"
MAX_LINE = 120
MAX_PARAGRAPH = 12
TWO_COMMANDS_BY = 30

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CODE_SPAN_PAGE = re.compile(r"`((?:docs|reports|deploy|rag)/[\w./-]+\.md)`")
FENCE = re.compile(r"^\s*(```|~~~)")


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def paragraphs(text: list[str]) -> list[tuple[int, list[str]]]:
    """Runs of non-blank lines outside fenced code, each with its first line's number."""
    runs: list[tuple[int, list[str]]] = []
    current: list[str] = []
    start = 0
    fenced = False
    for number, line in enumerate(text, start=1):
        if FENCE.match(line):
            fenced = not fenced
            if current:
                runs.append((start, current))
            current = []
            continue
        if fenced or not line.strip():
            if current:
                runs.append((start, current))
            current = []
            continue
        if not current:
            start = number
        current.append(line)
    if current:
        runs.append((start, current))
    return runs


def local_links(path: Path) -> list[str]:
    """The targets of the Markdown links in `path` that point at a file of the checkout."""
    targets = LINK.findall(path.read_text(encoding="utf-8"))
    return [t for t in targets if not re.match(r"^[a-z][a-z0-9+.-]*:", t) and not t.startswith("#")]


def resolve(page: Path, target: str) -> Path:
    return (page.parent / target.split("#", 1)[0]).resolve()


def test_readme_gives_the_two_commands_first() -> None:
    head = lines(README)[:TWO_COMMANDS_BY]
    assert any(line.startswith("#") and "Two commands" in line for line in head), (
        f"README.md: the heading 'Two commands' must come within its first {TWO_COMMANDS_BY} lines"
    )


def test_readme_lines_fit() -> None:
    long = [(n, len(line)) for n, line in enumerate(lines(README), start=1) if len(line) > MAX_LINE]
    assert not long, f"README.md lines over {MAX_LINE} characters (line, length): {long}"


def test_readme_paragraphs_are_short() -> None:
    long = [(start, len(run)) for start, run in paragraphs(lines(README)) if len(run) > MAX_PARAGRAPH]
    assert not long, f"README.md paragraphs over {MAX_PARAGRAPH} lines (first line, lines): {long}"


def test_readme_test_command_is_what_ci_runs() -> None:
    readme = README.read_text(encoding="utf-8")
    assert re.search(r"^make test\b", readme, re.M), "README.md no longer gives `make test`"
    assert re.search(r"^make serve\b", readme, re.M), "README.md no longer gives `make serve`"
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r"^make test$", ci, re.M), ".ci/run no longer runs `make test`, the README's command"
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    for target in ("install", "serve", "test"):
        assert re.search(rf"^{target}:", makefile, re.M), f"the Makefile has no `{target}` target"


def test_index_links_every_docs_page() -> None:
    linked = {resolve(INDEX, t) for t in local_links(INDEX)}
    pages = {p.resolve() for p in (REPO / "docs").rglob("*.md") if p != INDEX}
    missing = sorted(str(p.relative_to(REPO)) for p in pages - linked)
    assert not missing, f"docs/index.md does not link: {missing}"


def test_front_door_links_resolve() -> None:
    broken = [
        f"{page.relative_to(REPO)} -> {target}"
        for page in (README, INDEX)
        for target in local_links(page)
        if not resolve(page, target).exists()
    ]
    named = CODE_SPAN_PAGE.findall(README.read_text(encoding="utf-8"))
    broken += [f"README.md names `{path}`" for path in named if not (REPO / path).exists()]
    assert not broken, f"links to files that do not exist: {broken}"


def test_paragraphs_are_counted_outside_fences() -> None:
    text = ["one", "two", "", "```", "a", "", "b", "```", "three"]
    assert paragraphs(text) == [(1, ["one", "two"]), (9, ["three"])]
