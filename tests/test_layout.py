"""The package layout: one import namespace, and layers that only point down (docs/architecture.md).

Read from the source with `ast`, so a wrong import fails here before it fails a user: every import
of ragmend's own code is `ragmend.<part>`, and each part imports only the parts below it.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import PARTS, REPO

# The parts (tests/conftest.py): each a top-level folder of the repository, linked into ragmend/
# and importable only as ragmend.<part>.
CORE = "core"  # ragmend's own modules: errors, settings, models/, ...

# What each part may import (besides itself). The layers: cli -> server -> engine -> diagnosis,
# policy, actions -> rag, kg -> core; corpora (the data sets) sit below both train and bench
# (evaluation), so train never imports bench; the server imports neither evaluation nor training;
# nothing imports the server or the CLI.
ALLOWED: dict[str, set[str]] = {
    CORE: set(),
    "rag": {CORE},
    "kg": {CORE},
    "diagnosis": {CORE, "rag", "kg"},
    "policy": {CORE, "diagnosis"},
    "actions": {CORE, "rag", "kg", "diagnosis"},
    "engine": {CORE, "rag", "kg", "diagnosis", "policy", "actions"},
    "server": {CORE, "rag", "kg", "diagnosis", "policy", "actions", "engine"},
    "corpora": {CORE, "rag", "kg", "diagnosis"},
    "train": {CORE, "rag", "kg", "diagnosis", "policy", "actions", "engine", "corpora"},
    "bench": {CORE, "rag", "kg", "diagnosis", "policy", "actions", "engine", "corpora", "train"},
    "integrations": {CORE},  # clients of the HTTP API: ragmend from other stacks
    "cli": {CORE, *PARTS} - {"cli"},  # the top: every part
}


def _modules(part: str) -> list[Path]:
    root = REPO / ("ragmend" if part == CORE else part)
    files = sorted(root.rglob("*.py"))
    if part == CORE:  # ragmend/<part> are links to the parts' folders: not core
        files = [f for f in files if f.relative_to(root).parts[0] not in PARTS]
    return files


def _imports(path: Path) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.lineno, node.module))
    return out


def _part_of(module: str) -> str | None:
    head, _, rest = module.partition(".")
    if head != "ragmend":
        return None
    sub = rest.partition(".")[0]
    return sub if sub in PARTS else CORE


def test_every_part_is_linked_into_the_namespace_and_has_its_layer() -> None:
    """A top-level package folder is a part only through its link; each part has a layer rule."""
    packages = {p.name for p in REPO.iterdir() if (p / "__init__.py").is_file() and p.name != "tests"}
    assert packages - {"ragmend"} == set(PARTS), "link each package folder into ragmend/ (ln -s ../<part>)"
    for part in PARTS:
        assert (REPO / "ragmend" / part).resolve() == (REPO / part).resolve(), part
    assert set(ALLOWED) == {CORE, *PARTS}, "give every part its place in ALLOWED"


@pytest.mark.parametrize("part", [CORE, *PARTS])
def test_imports_use_the_namespace_and_point_down(part: str) -> None:
    problems = []
    for path in _modules(part):
        where = path.relative_to(REPO)
        for line, module in _imports(path):
            head = module.partition(".")[0]
            if head in PARTS:
                problems.append(f"{where}:{line}: `{module}`: import it as ragmend.{module}")
                continue
            target = _part_of(module)
            if target is not None and target != part and target not in ALLOWED[part]:
                problems.append(f"{where}:{line}: {part} imports {target} (`{module}`)")
    assert not problems, "\n".join(problems)


def test_tests_import_the_namespace() -> None:
    problems = [
        f"{path.name}:{line}: `{module}`"
        for path in sorted((REPO / "tests").glob("*.py"))
        for line, module in _imports(path)
        if module.partition(".")[0] in PARTS
    ]
    assert not problems, "\n".join(problems)


def test_the_wheel_installs_only_ragmend(tmp_path: Path) -> None:
    """Built and installed as a user gets it: only `ragmend` at the top, and it imports from anywhere."""
    # Built from a copy: setuptools writes build/ beside the sources, and the checkout stays clean.
    src = tmp_path / "checkout"
    local = {".git", ".venv", ".mypy_cache", ".ruff_cache", ".pytest_cache", "build", "data", "var"}
    shutil.copytree(
        REPO,
        src,
        symlinks=True,
        # What a checkout holds besides the sources (only at its top: rag/data is package data).
        ignore=lambda d, names: {
            n for n in names if (Path(d) == REPO and n in local) or n.endswith(".egg-info")
        },
    )
    wheels = tmp_path / "wheels"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(wheels),
            str(src),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = wheels.glob("ragmend-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        tops = {name.split("/")[0] for name in zf.namelist()}
        names = set(zf.namelist())
    assert tops == {"ragmend", f"{wheel.name.split('-')[0]}-{wheel.name.split('-')[1]}.dist-info"}
    for part in PARTS:
        if (REPO / part).is_dir():
            assert f"ragmend/{part}/__init__.py" in names, part
    assert "ragmend/rag/prompts.yaml" in names and "ragmend/rag/data/sample_corpus.jsonl" in names

    # A fresh venv with the wheel; the dependencies come from this one's site-packages through a
    # plain path entry (its .pth files, the editable install's among them, are not run from there).
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    ours = next(p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir())
    (site / "deps.pth").write_text(ours + "\n")
    with zipfile.ZipFile(wheel) as zf:  # install = unpack a pure-Python wheel into site-packages
        zf.extractall(site)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    def python(code: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(py), "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)

    ok = python(
        "import ragmend.server.app, ragmend.cli.main, ragmend.rag.prompts as p; print(p.PROMPTS_FILE)"
    )
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip().startswith(str(site)), ok.stdout
    for name in ("server", "bench", "rag", "engine", "cli"):
        refused = python(f"import {name}")
        assert refused.returncode != 0 and "ModuleNotFoundError" in refused.stderr, name
