"""What every `ragmend` command shares: the consoles, the settings of this invocation, errors, and
how a result is printed (`show`: JSON with --json, else a rich table or rich's coloured JSON)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from ragmend.errors import RagmendError
from ragmend.settings import Settings, load_settings

SHARED_DATA = Path("../shared/data")
out = Console()
# Messages unwrapped: a path or a file:line cut at the terminal's width could not be copied whole.
err = Console(stderr=True, soft_wrap=True)
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


def _indented(result: Any) -> str:
    return json.dumps(result, indent=2)


def this_command() -> str:
    """The command line as run, for a result to carry beside its figures."""
    import shlex
    import sys

    return "ragmend " + shlex.join(sys.argv[1:])


def show(
    result: Any,
    as_json: bool,
    render: Callable[[Any], None] | None = None,
    dump: Callable[[Any], str] = _indented,
) -> None:
    """Print a command's result on stdout: with --json, plain JSON (`dump(result)`, indented by
    default) for scripts and pipes; else `render(result)` (a table, a sentence) or, without a
    renderer, rich's coloured JSON. Every command with a --json flag prints through here."""
    if as_json:
        print(dump(result))
    elif render is not None:
        render(result)
    else:
        out.print_json(data=result)


def make_engine(s: Settings, collection: str | None = None) -> Any:
    """The engine of the default corpus, or of the named collection (declared in the
    configuration or created over the admin API; NotFound naming it otherwise)."""
    from ragmend.engine import Engine

    engine = Engine(s)
    if collection is None or collection == "default":
        return engine
    from ragmend.engine.collections import Collections

    return Collections(engine).open(collection)


@contextmanager
def training_progress() -> Iterator[Callable[[int, int, float], None]]:
    """A progress bar for a trainer's `progress(step, total, loss)` callback, open while in use."""
    with progress_bar() as bar:
        task = bar.add_task("training", total=None)
        yield lambda step, total, loss: bar.update(
            task, completed=step, total=total, description=f"training (loss {loss:.3f})"
        )


def progress_bar() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=err,
        transient=False,
    )
