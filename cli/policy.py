"""`ragmend policy ...`: the learned repair policy's state, or with --router the router's
(export, import, reset).

They work on the configured state (policy.state_path, or <data_dir>/policy.sqlite; the router's
router.state_path, or <data_dir>/router.sqlite; with `store.kind: postgres`, the shared database)
through the same Policy facade the server uses, so an import is checked exactly as the server
would check it. A running server keeps its own copy in memory: it sees the change at its next start.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from ragmend.cli.common import err, run, settings

policy_app = typer.Typer(
    help="The repair policy's learned state: export, import, reset.\n\n"
    "Example: ragmend policy export --out policy-state.json",
    no_args_is_help=True,
)


ROUTER_HELP = "The router's state (each question's first-pass plan) instead of the repair policy's."
Router = Annotated[bool, typer.Option("--router", help=ROUTER_HELP)]


def _location(s: Any, router: bool) -> tuple[str, bool]:
    """(where the state is, for messages; whether there is one to read)."""
    from ragmend.engine.router import router_state_path
    from ragmend.policy.facade import state_exists, state_location

    if not router:
        return state_location(s), state_exists(s)
    if s.store.kind == "postgres":
        return state_location(s) + " (namespace default/router)", True
    path = router_state_path(s)
    return str(path), path.exists()


def _open(s: Any, router: bool) -> Any:
    """The Policy over the chosen state (the router's needs no model to be read or written)."""
    from ragmend.engine.engine import open_policy

    if not router:
        return open_policy(s)
    from ragmend.engine.router import Router
    from ragmend.errors import InputError

    def no_embedding(texts: list[str]) -> Any:
        raise InputError("the router's state commands embed nothing")

    return Router(s, no_embedding).policy


def _summary(state: dict[str, Any], where: str) -> dict[str, Any]:
    arms = state.get("arms", {})
    return {
        "state_path": where,
        "kind": state.get("kind"),
        "dim": state.get("dim"),
        "pulls": {arm: v["pulls"] for arm, v in arms.items()},
        "total_pulls": sum(v["pulls"] for v in arms.values()),
    }


@policy_app.command("export")
def policy_export(
    out_file: Annotated[
        Path | None, typer.Option("--out", help="Write the JSON to this file (default: standard output).")
    ] = None,
    router: Router = False,
) -> None:
    """Print (or write) the learned state as versioned JSON: per-arm sums, counts, context layout.

    Example: ragmend policy export --out policy-state.json
    Example: ragmend policy export --router --out router-state.json
    """
    from ragmend.errors import InputError
    from ragmend.fileio import atomic_write_json

    def work() -> None:
        s = settings()
        where, exists = _location(s, router)
        if not exists:
            # Read-only: opening the store would create an empty state file as a side effect.
            raise InputError(f"no policy state at {where}: nothing has been learned there yet")
        pol = _open(s, router)
        try:
            data = pol.export_state()
        finally:
            pol.close()
        if out_file is None:
            print(json.dumps(data))
            return
        atomic_write_json(out_file, data)
        err.print(json.dumps({"out": str(out_file), **_summary(data, where)}))

    run(work)


@policy_app.command("import")
def policy_import(
    file: Annotated[Path, typer.Argument(help="A JSON file written by `ragmend policy export`.")],
    router: Router = False,
) -> None:
    """Replace the learned state with an export (checked first: a file that does not fit changes nothing).

    Example: ragmend policy import policy-state.json
    """
    from ragmend.errors import InputError

    def work() -> None:
        if not file.is_file():
            raise InputError(f"policy state file not found: {file}")
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise InputError(f"{file} is not a JSON policy export: {e}") from None
        s = settings()
        pol = _open(s, router)
        try:
            pol.import_state(data)
        except InputError as e:
            raise InputError(f"{file} was not imported (the state is unchanged): {e}") from None
        else:
            print(
                json.dumps({"imported": str(file), **_summary(pol.export_state(), _location(s, router)[0])})
            )
        finally:
            pol.close()

    run(work)


@policy_app.command("reset")
def policy_reset(
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    router: Router = False,
) -> None:
    """Forget everything the policy has learned (every arm back to its prior). Export it first to keep it.

    Example: ragmend policy reset --yes
    Example: ragmend policy reset --router --yes
    """

    def work() -> None:
        s = settings()
        path, exists = _location(s, router)
        if not exists:
            print(json.dumps({"state_path": path, "reset": False, "forgotten_pulls": 0}))
            return
        pol = _open(s, router)
        try:
            pulls = sum(a.pulls for a in pol.stats().values())
            if not yes and not typer.confirm(f"Forget {pulls} learned updates in {path}?", err=True):
                err.print("nothing changed")
                raise typer.Exit(1)
            pol.reset()
        finally:
            pol.close()
        print(json.dumps({"state_path": path, "reset": True, "forgotten_pulls": pulls}))

    run(work)
