"""The model names this server answers to, and the corpus each one selects: the server's own
name (`server.model_name`: the default corpus), `<model name>/<collection>` for each collection,
and the generator's model string (the default corpus too, as before collections existed)."""

from __future__ import annotations

from ragmend.engine import Engine
from ragmend.engine.collections import Collections
from ragmend.errors import NotFound
from ragmend.server.errors import ModelNotFound


class ServedModels:
    def __init__(self, collections: Collections):
        self.collections = collections

    @property
    def served(self) -> str:
        """The default corpus's name (read at each request: a configuration reload replaces it)."""
        return self.collections.default.settings.server.model_name

    def names(self) -> list[str]:
        """What GET /v1/models lists."""
        return [self.served, *(f"{self.served}/{c}" for c in self.collections.names())]

    def engine_for(self, model: str | None, param: str | None = "model") -> Engine:
        """The engine answering for `model` (None: the default); ModelNotFound (404) naming the
        request's `param` for any other name. May open a collection: call it off the event loop."""
        default = self.collections.default
        if model is None or model == self.served:
            return default
        if default.models.is_loaded("generator") and model == default.models.generator.model:
            return default
        prefix = f"{self.served}/"
        if model.startswith(prefix):
            try:
                return self.collections.get(model.removeprefix(prefix))
            except NotFound:
                pass
        raise ModelNotFound(
            f"The model '{model}' does not exist; this server serves {', '.join(map(repr, self.names()))} "
            "(GET /v1/models).",
            param,
        )
