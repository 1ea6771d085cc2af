"""`ragmend config`: the configuration in force, and where each value came from."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.table import Table

from ragmend.cli.common import Invocation, out, run, show
from ragmend.settings import load_settings, value_origins

config_app = typer.Typer(
    help="The configuration in force (docs/configuration.md describes every key).", no_args_is_help=True
)


@config_app.command("show")
def show_config(
    prefix: Annotated[
        str | None, typer.Argument(help="Only the keys under this one, e.g. policy or rag.k.")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print a JSON list of {key, value, origin}.")
    ] = False,
) -> None:
    """Print every setting in force, its value (secrets hidden) and where it came from: the command
    line, the environment, the configuration file or the default.

    Example: ragmend -c deploy/ragmend.example.yaml config show policy
    """

    def work() -> None:
        s = load_settings(Invocation.config, **Invocation.overrides)
        rows = [
            {"key": key, "value": value, "origin": origin}
            for key, value, origin in value_origins(s, Invocation.config, Invocation.overrides)
            if prefix is None or key == prefix or key.startswith(prefix + ".")
        ]
        show(rows, as_json, _table)

    run(work)


def _table(rows: list[dict[str, Any]]) -> None:
    table = Table("key", "value", "from")
    for r in rows:
        table.add_row(
            r["key"], repr(r["value"]) if isinstance(r["value"], str) else str(r["value"]), r["origin"]
        )
    out.print(table)


@config_app.command("schema")
def schema() -> None:
    """Print the configuration's JSON schema (every key with its description, type and range), for
    editors and validators of configuration files.

    Example: ragmend config schema > ragmend.schema.json
    """
    from ragmend.settings import Settings

    print(json.dumps(Settings.model_json_schema(), indent=2))
