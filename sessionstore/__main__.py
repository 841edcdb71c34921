"""`python -m sessionstore` runs the CLI."""

from sessionstore.cli import main

main()
