"""The HTTP server: the app (app.py), its protocol models (schemas.py, openai_schemas.py) and the
mapping onto them (mapping.py), errors, auth, admission, admin, hot reload and metrics.

Imports the engine and below, never the evaluation (bench) or training (train); nothing but the
command line (ragmend.cli) imports the server.
"""
