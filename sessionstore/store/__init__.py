"""The store engine: sessions, numbered records, their derived states, lineage, export.

Rules live here, never in the CLI: a record is written exactly once (its
marker last and atomically), states are derived from the files alone.
"""
