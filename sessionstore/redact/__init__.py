"""Byte-level secret redaction: the matcher, its variants, secrets files.

Depends only on the bottom layer (errors, private helpers).
"""
