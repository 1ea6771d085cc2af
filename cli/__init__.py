"""The `ragmend` command line: one typer app (main.py) with a module per verb group.

Top of the layering, beside the HTTP server: the CLI may import the server, the engine, the
evaluation harness (bench) and training (train); nothing imports the CLI.
"""
