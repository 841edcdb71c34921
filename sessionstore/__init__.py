"""sessionstore: durable, crash-safe records for agent sessions."""

__version__ = "0.1.0"
