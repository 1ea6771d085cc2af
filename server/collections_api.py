"""The admin API of collections (/admin/collections/*): list, create and delete collections, and
add, replace or delete a collection's documents over HTTP. server/auth.py requires an admin key.

Documents come as a JSONL body (one {"id", "title", "text"} object a line, the CLI's JSONL
format) or as a file upload (multipart/form-data, field `file`), within server.max_upload_bytes
and rag.max_file_bytes like a file given to `ragmend ingest`, validated whole before anything is
written; the new generation is built aside and swapped in atomically (rag/ingest.py). The path
name `default` is the default corpus. Work runs in a worker thread, never on the event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

from anyio import to_thread
from fastapi import APIRouter, Query, Request
from starlette.datastructures import UploadFile

from ragmend.engine.collection_registry import CollectionSpec
from ragmend.engine.collections import Collections
from ragmend.errors import InputError, PayloadTooLarge
from ragmend.rag.documents import SourceDocument, parse_jsonl
from ragmend.server.admin import admin_change
from ragmend.server.mapping import collection_view, document_list, index_refresh
from ragmend.server.schemas import (
    CollectionCreate,
    CollectionList,
    CollectionView,
    DocumentList,
    IndexRefresh,
)
from ragmend.server.state import CollectionsDep, EventsDep

log = logging.getLogger("ragmend.admin")

JSONL_TYPES = ("application/x-ndjson", "application/jsonl", "application/json-lines", "text/plain")
# Where a document sent over HTTP came from (its DocEntry.source): a refresh of the collection's
# sources never removes it, a DELETE does.
HTTP_SOURCE = "http"

_DOCUMENTS_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            **{t: {"schema": {"type": "string"}} for t in JSONL_TYPES[:2]},
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "properties": {"file": {"type": "string", "format": "binary"}},
                    "required": ["file"],
                }
            },
        },
        "description": 'JSONL: one {"id", "title", "text"} object a line (title optional); or the '
        "same as a file upload (field `file`).",
    }
}


async def _documents(request: Request, max_bytes: int) -> list[SourceDocument]:
    """The documents of the request: a JSONL body, or an uploaded JSONL file."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind == "multipart/form-data":
        form = await request.form(max_files=1, max_fields=1)
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise InputError("multipart body: send the JSONL file as the field 'file'")
        data, where = await upload.read(), f"upload {upload.filename or 'file'}"
    elif kind in JSONL_TYPES:
        data, where = await request.body(), "request body"
    else:
        raise InputError(
            f"Content-Type {kind or '(none)'}: send JSONL ({', '.join(JSONL_TYPES[:2])}) or "
            "multipart/form-data with a 'file'"
        )
    if len(data) > max_bytes:
        raise PayloadTooLarge(f"{where} is {len(data)} bytes, over rag.max_file_bytes={max_bytes}")
    docs = parse_jsonl(data, where, HTTP_SOURCE)
    if not docs:
        raise InputError(f"{where}: no document with text")
    return docs


router = APIRouter(prefix="/admin/collections", tags=["admin"])


def _model_name(collections: Collections) -> str:
    return collections.default.settings.server.model_name


def _view(collections: Collections, name: str) -> CollectionView:
    return collection_view(collections.info(name), _model_name(collections))


@router.get("", summary="Every collection: the default corpus, declared and created ones")
async def list_collections(collections: CollectionsDep) -> CollectionList:
    return await to_thread.run_sync(lambda: CollectionList(data=[_view(collections, n) for n in collections]))


def confined(path: Path, roots: Sequence[Path]) -> Path:
    """`path` by its real path, when that is an existing path under one of `roots` (theirs real
    too); else one InputError, the same whether it is missing or outside, so that the answer
    tells nothing of the server's files."""
    refused = InputError(f"sources: {path} is not a path under server.source_roots that this server may read")
    try:
        real = path.expanduser().resolve()
        inside = any(real.is_relative_to(root.expanduser().resolve()) for root in roots)
        if not inside or not real.exists():
            raise refused
    except (ValueError, OSError):  # a NUL byte, a loop of links
        raise refused from None
    return real


@router.post("", status_code=201, summary="Create a collection (built from its sources, if any)")
async def create_collection(
    body: CollectionCreate, collections: CollectionsDep, events: EventsDep
) -> CollectionView:
    roots = collections.default.settings.server.source_roots
    spec = CollectionSpec(body.name, tuple(confined(Path(p), roots) for p in body.sources), body.policy)

    def create() -> CollectionView:
        return collection_view(collections.create(spec), _model_name(collections))

    return await to_thread.run_sync(admin_change, events, "collection create", create)


@router.get("/{name}", summary="One collection")
async def get_collection(name: str, collections: CollectionsDep) -> CollectionView:
    return await to_thread.run_sync(_view, collections, name)


@router.delete("/{name}", status_code=204, summary="Delete a created collection and its data")
async def delete_collection(name: str, collections: CollectionsDep, events: EventsDep) -> None:
    await to_thread.run_sync(admin_change, events, "collection delete", lambda: collections.delete(name))


@router.get("/{name}/documents", summary="The documents of a collection's current generation")
async def list_documents(name: str, collections: CollectionsDep) -> DocumentList:
    def read() -> DocumentList:
        engine = collections.get(name)
        return document_list(name, engine.corpus.store.current_generation(), engine.corpus.documents())

    return await to_thread.run_sync(read)


@router.post(
    "/{name}/documents",
    summary="Add or replace documents (JSONL body or upload); the others are kept",
    openapi_extra=_DOCUMENTS_BODY,
)
async def add_documents(
    name: str, request: Request, collections: CollectionsDep, events: EventsDep
) -> IndexRefresh:
    engine = await to_thread.run_sync(collections.get, name)  # 404 before the body is read
    docs = await _documents(request, engine.settings.rag.max_file_bytes)

    def add() -> IndexRefresh:
        report = collections.upsert_documents(name, docs)
        log.info("admin: %d document(s) sent to %s: %s", len(docs), name, report.generation)
        return index_refresh(report)

    return await to_thread.run_sync(admin_change, events, "documents add", add)


@router.delete("/{name}/documents", summary="Delete documents by id (?id=a&id=b)")
async def delete_documents(
    name: str,
    ids: Annotated[list[str], Query(alias="id", min_length=1)],
    collections: CollectionsDep,
    events: EventsDep,
) -> IndexRefresh:
    def delete() -> IndexRefresh:
        report = collections.upsert_documents(name, [], delete=ids)
        log.info("admin: %d document(s) deleted from %s: %s", len(ids), name, report.generation)
        return index_refresh(report)

    return await to_thread.run_sync(admin_change, events, "documents delete", delete)


@router.post("/{name}/refresh", summary="Re-read the collection's own configured sources")
async def refresh(name: str, collections: CollectionsDep, events: EventsDep) -> IndexRefresh:
    def run() -> IndexRefresh:
        return index_refresh(collections.get(name).corpus.refresh_index())

    return await to_thread.run_sync(admin_change, events, "collection refresh", run)
