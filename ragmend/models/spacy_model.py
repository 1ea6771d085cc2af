"""spaCy role (triple extraction in kg/): en_core_web_sm 3.8 from its wheel, or any installed pipeline."""

from __future__ import annotations

from typing import Any

from ragmend.errors import ModelUnavailable
from ragmend.models import bundled
from ragmend.settings import ModelsSettings


def spacy_source(models: ModelsSettings) -> tuple[str, str]:
    spec = models.spacy.model
    if spec.startswith(bundled.BUNDLED_PREFIX):
        m = bundled.resolve_bundled(spec, "spacy")
        return m.source, str(m.path())
    return "spaCy package or path", spec


def load_spacy(models: ModelsSettings) -> Any:
    import spacy

    _, path = spacy_source(models)
    try:
        return spacy.load(path)
    except OSError as e:
        raise ModelUnavailable(f"spaCy pipeline '{path}' could not be loaded: {e}") from e
