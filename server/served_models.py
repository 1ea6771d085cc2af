"""The model names this server answers to, and the corpus each one selects: the server's own
name (`server.model_name`: the default corpus), `<model name>/<collection>` for each collection,
and the generator's model string (the default corpus too, as before collections existed).

Each lookup is for one caller's `Reads` (server/auth.py `reads_of`): a collection it may not read
is neither listed nor served, and asking for it is the same 404, with the same message, as asking
for one that does not exist."""

from __future__ import annotations

from ragmend.engine import Engine
from ragmend.engine.collections import Collections
from ragmend.errors import NotFound
from ragmend.server.auth import EVERY, Reads
from ragmend.server.errors import ModelNotFound
from ragmend.settings import DEFAULT_COLLECTION


class ServedModels:
    def __init__(self, collections: Collections):
        self.collections = collections

    @property
    def served(self) -> str:
        """The default corpus's name (read at each request: a configuration reload replaces it)."""
        return self.collections.default.settings.server.model_name

    def names(self, reads: Reads = EVERY) -> list[str]:
        """What GET /v1/models lists: the corpora `reads` allows."""
        default = [self.served] if reads.may_read(DEFAULT_COLLECTION) else []
        return default + [f"{self.served}/{c}" for c in self.collections.names() if reads.may_read(c)]

    def collection_of(self, model: str | None) -> str | None:
        """The collection a model name selects (`default` for the default corpus), whether or not
        it exists; None for a name of no collection."""
        default = self.collections.default
        if model is None or model == self.served:
            return DEFAULT_COLLECTION
        if default.models.is_loaded("generator") and model == default.models.generator.model:
            return DEFAULT_COLLECTION
        prefix = f"{self.served}/"
        return model.removeprefix(prefix) if model.startswith(prefix) else None

    def engine_for(self, model: str | None, param: str | None = "model", reads: Reads = EVERY) -> Engine:
        """The engine answering for `model` (None: the default) to a caller who `reads`;
        ModelNotFound (404) naming the request's `param` for any other name, or one it may not
        read. May open a collection: call it off the event loop."""
        name = self.collection_of(model)
        if name is not None and reads.may_read(name):
            try:
                return self.collections.get(name)
            except NotFound:
                pass
        elif name is not None and name != DEFAULT_COLLECTION:
            # The registry read a missing name costs, so that the time tells nothing either.
            self.collections.specs(fresh=True)
        shown = self.names(reads)
        serves = ", ".join(map(repr, shown)) if shown else "no model to this key"
        asked = model or self.served
        raise ModelNotFound(
            f"The model '{asked}' does not exist; this server serves {serves} (GET /v1/models).", param
        )
