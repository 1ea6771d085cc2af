"""The engine: owns the models, the index, the knowledge graph and the policy, and answers
requests: answer -> diagnose -> (on a failure) select -> repair -> learn, between the server
above and diagnosis/, policy/, actions/, rag/ and kg/ below (docs/architecture.md).
"""

from ragmend.engine.engine import Engine

__all__ = ["Engine"]
