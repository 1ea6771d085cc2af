"""What every `ragmend` command shares: the consoles, the settings of this invocation, errors."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from ragmend.errors import RagmendError
from ragmend.settings import Settings, load_settings

SHARED_DATA = Path("../shared/data")
out = Console()
err = Console(stderr=True)
T = TypeVar("T")


class Invocation:
    """The global options of this `ragmend` invocation (set by the top-level callback)."""

    config: Path | None = None
    overrides: dict[str, Any] = {}  # noqa: RUF012 - replaced, never mutated, per invocation


def settings() -> Settings:
    from ragmend.models.runtime import prepare_libraries

    s = load_settings(Invocation.config, **Invocation.overrides)
    # Before any command imports the model libraries: some read their environment at import.
    prepare_libraries(s.models.allow_hub)
    return s


def run(fn: Callable[[], T]) -> T:
    """Turn ragmend's own errors into a message and the error's exit code."""
    try:
        return fn()
    except RagmendError as e:
        err.print(f"[bold red]error:[/] {e}")
        raise typer.Exit(e.exit_code) from None


def make_engine(s: Settings) -> Any:
    from ragmend.engine import Engine

    return Engine(s)


def progress_bar() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=err,
        transient=False,
    )
