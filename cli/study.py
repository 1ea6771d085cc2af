"""`ragmend study <name> [options]`: the DEV studies of bench/studies/, each with its own options."""

from __future__ import annotations

from typing import Annotated

import typer

from ragmend.cli.common import err, settings


def study(
    ctx: typer.Context,
    name: Annotated[str | None, typer.Argument(help="The study; --list names them.")] = None,
    listing: Annotated[bool, typer.Option("--list", help="Name every study and what it measures.")] = False,
) -> None:
    """Run a DEV study (bench/studies/): the measurement behind a setting or a figure in docs/ and
    reports/. Its options follow its name (`ragmend study <name> --help`).

    Example: ragmend study abstention --workdir var/unanswerable --test 100,60,40 --out a.json
    """
    from ragmend.bench.studies import STUDIES, run

    if listing or name is None:
        for key, (_, what) in STUDIES.items():
            print(f"{key:20} {what}")
        if name is None and not listing:
            raise typer.Exit(2)
        return
    if name not in STUDIES:
        err.print(f"[bold red]error:[/] unknown study {name!r}; studies: {', '.join(STUDIES)}")
        raise typer.Exit(2)
    code = run(name, [*ctx.args], settings)
    raise typer.Exit(code)
