"""The on-disk format: names and id rules, the pydantic models, the prompt-template language.

The bottom of the package (with the private helpers and `errors`): it imports
nothing above it.
"""
