"""sessionstore: durable, crash-safe records for agent sessions.

Public names are re-exported here lazily (PEP 562), so `import sessionstore`
stays cheap for the CLI's hot paths; each name lives in the module that
defines it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from sessionstore.best import Best, Objective, best_trial, report_fields
    from sessionstore.daemon import Daemon, WatchConfig
    from sessionstore.errors import (
        CorruptFile,
        InvalidId,
        InvalidInput,
        LockHeld,
        PreviousRunning,
        RecordCompleted,
        RecordNotFound,
        SecretRefused,
        SessionExists,
        SessionNotFound,
        SessionStoreError,
        TemplateError,
        WaitTimedOut,
    )
    from sessionstore.mirror import Mirror, PassReport
    from sessionstore.redact import Redactor
    from sessionstore.store import Collection, Record, RecordState, RecordWriter, Session, Store
    from sessionstore.template import render
    from sessionstore.verdict import Outcome, Verdict, evaluate_output_contract

_EXPORTS = {
    "Best": "sessionstore.best",
    "Daemon": "sessionstore.daemon",
    "Mirror": "sessionstore.mirror",
    "Objective": "sessionstore.best",
    "Outcome": "sessionstore.verdict",
    "PassReport": "sessionstore.mirror",
    "Redactor": "sessionstore.redact",
    "Verdict": "sessionstore.verdict",
    "WatchConfig": "sessionstore.daemon",
    "best_trial": "sessionstore.best",
    "evaluate_output_contract": "sessionstore.verdict",
    "render": "sessionstore.template",
    "report_fields": "sessionstore.best",
    "Collection": "sessionstore.store",
    "CorruptFile": "sessionstore.errors",
    "InvalidId": "sessionstore.errors",
    "InvalidInput": "sessionstore.errors",
    "LockHeld": "sessionstore.errors",
    "PreviousRunning": "sessionstore.errors",
    "Record": "sessionstore.store",
    "RecordCompleted": "sessionstore.errors",
    "RecordNotFound": "sessionstore.errors",
    "RecordState": "sessionstore.store",
    "RecordWriter": "sessionstore.store",
    "SecretRefused": "sessionstore.errors",
    "Session": "sessionstore.store",
    "SessionExists": "sessionstore.errors",
    "SessionNotFound": "sessionstore.errors",
    "SessionStoreError": "sessionstore.errors",
    "Store": "sessionstore.store",
    "TemplateError": "sessionstore.errors",
    "WaitTimedOut": "sessionstore.errors",
}

__all__ = sorted([*_EXPORTS, "__version__"])


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'sessionstore' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
