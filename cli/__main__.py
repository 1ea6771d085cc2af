"""`python -m ragmend.cli`: the same entry point as the `ragmend` script."""

from ragmend.cli.main import main

main()
