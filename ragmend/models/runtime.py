"""Applies the environment third-party libraries read at import time, exactly once.

Called by every model loader before it imports transformers, sentence-transformers or litellm;
the values come from ragmend.settings.library_env so settings stays the only reader of env.
"""

from __future__ import annotations

import os
import threading

from ragmend.settings import library_env

_lock = threading.Lock()


def prepare_libraries(allow_hub: bool) -> None:
    with _lock:
        for key, value in library_env(allow_hub).items():
            # setdefault: an operator's explicit environment wins.
            os.environ.setdefault(key, value)
