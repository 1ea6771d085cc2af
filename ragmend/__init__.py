"""ragmend's foundation layer: settings, errors, model roles and shared value types.

Everything above (rag, kg, diagnosis, policy, actions, engine, server, bench) may import from here;
nothing here imports from them.
"""

__version__ = "0.1.0"
