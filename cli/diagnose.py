"""`ragmend diagnose`: check answers another system wrote, offline, with the diagnoser the server
uses, reading and writing the shapes of POST /v1/diagnose (docs/api.md, "Check any answer").

One answer from the options, printed as JSON; or a JSONL file of requests (each line a
/v1/diagnose body, with an optional "id") into a JSONL file of results, one line per answer as it
is checked, so a run that stops resumes where it stopped (the ids already written are skipped; a
last line cut short is checked again).
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError

from ragmend.cli.common import err, make_engine, progress_bar, run, settings
from ragmend.errors import InputError, describe_validation
from ragmend.fileio import atomic_write_text
from ragmend.jsonl import numbered_objects


def diagnose(
    requests: Annotated[
        Path | None,
        typer.Argument(help='JSONL of /v1/diagnose request bodies (an optional "id" each); - for stdin.'),
    ] = None,
    out: Annotated[Path | None, typer.Option(help="JSONL of results (needed with a requests file).")] = None,
    answer: Annotated[str | None, typer.Option(help="One answer to check (instead of a file).")] = None,
    question: Annotated[str | None, typer.Option(help="The question it answers.")] = None,
    passage: Annotated[
        list[str] | None, typer.Option(help="A passage it was written from (repeat for several).")
    ] = None,
    collection: Annotated[
        str | None, typer.Option(help="The corpus whose settings (and retrieval, without passages) serve.")
    ] = None,
) -> None:
    """Check answers: the diagnosis of given (question, answer, passages), as POST /v1/diagnose.

    Examples: ragmend diagnose --question "Who designed it?" --answer "Gustave Eiffel." --passage "..."
              ragmend diagnose answers.jsonl --out checked.jsonl
    """

    def work() -> None:
        if (requests is None) == (answer is None):
            raise InputError("give a requests file or --answer, not both")
        if requests is not None and out is None:
            raise InputError("--out: needed with a requests file")
        checker = Checker(collection)
        if answer is not None:
            body: dict[str, Any] = {"answer": answer, "question": question}
            if passage:
                body["passages"] = [{"text": p} for p in passage]
            print(json.dumps(checker.check(body, "answer"), indent=2))
            return
        assert requests is not None and out is not None
        checker.check_file(requests, out)

    run(work)


class Checker:
    """The default corpus's engine (or a collection's), loaded for what the answers need."""

    def __init__(self, collection: str | None):
        self.engine = make_engine(settings(), collection)
        self.name = collection or self.engine.settings.server.model_name

    def check(self, body: dict[str, Any], where: str) -> dict[str, Any]:
        from ragmend.engine.checking import check_answer
        from ragmend.server.diagnose_api import check_request
        from ragmend.server.diagnose_schemas import DiagnoseRequest
        from ragmend.server.mapping import checked_response

        try:
            request = DiagnoseRequest.model_validate({k: v for k, v in body.items() if k != "id"})
        except ValidationError as e:
            raise InputError(f"{where}: {describe_validation(e)}") from None
        check = check_request(request, self.engine.settings.server, f"{where}: ")
        if check.passages is None and not self.engine.ready:
            self.engine.load(roles=("embeddings", "reranker", "nli"))  # retrieval: the index too
        checked = check_answer(self.engine, check)
        check_id = str(body.get("id") or f"check-{uuid.uuid4().hex}")
        return checked_response(checked, check_id, self.name).model_dump(mode="json")

    def check_file(self, requests: Path, out: Path) -> None:
        lines = list(_numbered(requests))
        done = _written_ids(out)
        todo = [(n, body) for n, body in lines if _id(n, body) not in done]
        err.print(f"{len(lines)} answers, {len(lines) - len(todo)} already in {out}, {len(todo)} to check")
        with out.open("a", encoding="utf-8") as sink, progress_bar() as bar:
            task = bar.add_task("checking", total=len(todo))
            for n, body in todo:
                result = self.check({**body, "id": _id(n, body)}, f"{requests}:{n}")
                sink.write(json.dumps(result) + "\n")
                sink.flush()
                os.fsync(sink.fileno())  # a line written is a line a resumed run skips
                bar.advance(task)


def _numbered(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    text = sys.stdin.read() if str(path) == "-" else _read(path)
    yield from numbered_objects(text.splitlines(), path, "a /v1/diagnose body")


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None


def _id(n: int, body: dict[str, Any]) -> str:
    return str(body.get("id") or f"line-{n}")


def _written_ids(out: Path) -> set[str]:
    """The ids a previous run wrote whole; a last line cut short is dropped from the file."""
    if not out.exists():
        return set()
    ids, kept = set(), []
    for line in out.read_text(encoding="utf-8").splitlines():
        try:
            ids.add(str(json.loads(line)["id"]))
            kept.append(line)
        except (json.JSONDecodeError, KeyError, TypeError):
            break
    atomic_write_text(out, "".join(line + "\n" for line in kept))
    return ids
