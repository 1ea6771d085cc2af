"""The surfaces people use: the HTTP server (app.py) and the command line (cli.py).

Top of the layering: server imports engine and below; nothing imports server.
"""
