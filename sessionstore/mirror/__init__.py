"""The atomic mirror: a stateless pass from a workspace into a destination, and its daemon.

Depends only on redact and the bottom layer (format, private helpers,
errors); it knows a session's layout from `format`, never through `store`.
"""
