"""sessionstore: durable, crash-safe records for agent sessions.

Public names are re-exported here lazily (PEP 562), so `import sessionstore`
stays cheap for the CLI's hot paths; each name lives in the module that
defines it.
"""

from __future__ import annotations

import importlib

# Not `typing.TYPE_CHECKING`: importing typing (re, enum, functools) is a third of what
# `sessionstore --version` would cost over the interpreter's start; mypy reads this name.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__version__ = "0.2.0"

if TYPE_CHECKING:
    from sessionstore.errors import (
        AmbiguousTarget,
        CollectionFull,
        CorruptFile,
        DestinationLost,
        InvalidId,
        InvalidInput,
        LineageWarning,
        LockHeld,
        NoBestTrial,
        PreviousRunning,
        PreviousUnknown,
        RecordCompleted,
        RecordNotFound,
        RedactionUnsafe,
        SecretRefused,
        SessionBusy,
        SessionExists,
        SessionFinished,
        SessionNotFound,
        SessionStoreError,
        StorageError,
        StreamFinished,
        TemplateError,
        TooLarge,
        Unavailable,
        WaitTimedOut,
    )
    from sessionstore.format.template import render
    from sessionstore.harness.verdict import Outcome, Verdict, evaluate_output_contract
    from sessionstore.inspect.best import Best, Objective, best_trial, report_fields
    from sessionstore.mirror.daemon import Daemon, WatchConfig
    from sessionstore.mirror.mirror import Mirror, PassReport
    from sessionstore.redact.redactor import Redactor
    from sessionstore.redact.scan import Scanner
    from sessionstore.redact.scan_tree import scan_path
    from sessionstore.store.doctor import doctor
    from sessionstore.store.session import (
        Collection,
        Record,
        RecordState,
        RecordWriter,
        Session,
        Store,
    )

_EXPORTS = {
    "AmbiguousTarget": "sessionstore.errors",
    "Best": "sessionstore.inspect.best",
    "Collection": "sessionstore.store.session",
    "CollectionFull": "sessionstore.errors",
    "CorruptFile": "sessionstore.errors",
    "Daemon": "sessionstore.mirror.daemon",
    "DestinationLost": "sessionstore.errors",
    "InvalidId": "sessionstore.errors",
    "InvalidInput": "sessionstore.errors",
    "LineageWarning": "sessionstore.errors",
    "LockHeld": "sessionstore.errors",
    "Mirror": "sessionstore.mirror.mirror",
    "NoBestTrial": "sessionstore.errors",
    "Objective": "sessionstore.inspect.best",
    "Outcome": "sessionstore.harness.verdict",
    "PassReport": "sessionstore.mirror.mirror",
    "PreviousRunning": "sessionstore.errors",
    "PreviousUnknown": "sessionstore.errors",
    "Record": "sessionstore.store.session",
    "RecordCompleted": "sessionstore.errors",
    "RecordNotFound": "sessionstore.errors",
    "RecordState": "sessionstore.store.session",
    "RecordWriter": "sessionstore.store.session",
    "RedactionUnsafe": "sessionstore.errors",
    "Redactor": "sessionstore.redact.redactor",
    "Scanner": "sessionstore.redact.scan",
    "SecretRefused": "sessionstore.errors",
    "Session": "sessionstore.store.session",
    "SessionBusy": "sessionstore.errors",
    "SessionExists": "sessionstore.errors",
    "SessionFinished": "sessionstore.errors",
    "SessionNotFound": "sessionstore.errors",
    "SessionStoreError": "sessionstore.errors",
    "StorageError": "sessionstore.errors",
    "Store": "sessionstore.store.session",
    "StreamFinished": "sessionstore.errors",
    "TemplateError": "sessionstore.errors",
    "TooLarge": "sessionstore.errors",
    "Unavailable": "sessionstore.errors",
    "Verdict": "sessionstore.harness.verdict",
    "WaitTimedOut": "sessionstore.errors",
    "WatchConfig": "sessionstore.mirror.daemon",
    "best_trial": "sessionstore.inspect.best",
    "doctor": "sessionstore.store.doctor",
    "evaluate_output_contract": "sessionstore.harness.verdict",
    "render": "sessionstore.format.template",
    "report_fields": "sessionstore.inspect.best",
    "scan_path": "sessionstore.redact.scan_tree",
}

# Literal, so type checkers see the re-exports; a test checks it matches _EXPORTS.
__all__ = [
    "AmbiguousTarget",
    "Best",
    "Collection",
    "CollectionFull",
    "CorruptFile",
    "Daemon",
    "DestinationLost",
    "InvalidId",
    "InvalidInput",
    "LineageWarning",
    "LockHeld",
    "Mirror",
    "NoBestTrial",
    "Objective",
    "Outcome",
    "PassReport",
    "PreviousRunning",
    "PreviousUnknown",
    "Record",
    "RecordCompleted",
    "RecordNotFound",
    "RecordState",
    "RecordWriter",
    "RedactionUnsafe",
    "Redactor",
    "Scanner",
    "SecretRefused",
    "Session",
    "SessionBusy",
    "SessionExists",
    "SessionFinished",
    "SessionNotFound",
    "SessionStoreError",
    "StorageError",
    "Store",
    "StreamFinished",
    "TemplateError",
    "TooLarge",
    "Unavailable",
    "Verdict",
    "WaitTimedOut",
    "WatchConfig",
    "__version__",
    "best_trial",
    "doctor",
    "evaluate_output_contract",
    "render",
    "report_fields",
    "scan_path",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'sessionstore' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
