"""What the app's routes share, kept on the app's state by create_app, and the FastAPI
dependencies that read it: a route names what it needs (`engine: EngineDep`), never a closure."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from fastapi import Depends, Request

from ragmend.engine import Engine
from ragmend.engine.collections import Collections
from ragmend.instrumentation import Events


def engine_of(request: Request) -> Engine:
    """The default corpus's engine."""
    engine: Engine = request.app.state.engine
    return engine


def collections_of(request: Request) -> Collections:
    collections: Collections = request.app.state.collections
    return collections


def events_of(request: Request) -> Events:
    """Where the app's events go (the metrics, the event log)."""
    events: Events = request.app.state.events
    return events


def config_file_of(request: Request) -> Path | None:
    """The configuration file the server was started with (None: settings from elsewhere)."""
    path: Path | None = request.app.state.config_file
    return path


EngineDep = Annotated[Engine, Depends(engine_of)]
CollectionsDep = Annotated[Collections, Depends(collections_of)]
EventsDep = Annotated[Events, Depends(events_of)]
ConfigFileDep = Annotated["Path | None", Depends(config_file_of)]
