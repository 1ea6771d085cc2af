"""The engine: owns the models, the index and the pipeline, and answers requests.

Later issues put the diagnose -> select -> repair -> learn loop here, between the server above
and diagnosis/, policy/, actions/, rag/ and kg/ below.
"""

from ragmend.engine.core import Engine

__all__ = ["Engine"]
