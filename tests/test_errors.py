"""The error tree: every error is exported, subclasses a built-in, and pickles with its facts.

The classes are discovered (every subclass of `SessionStoreError`, every
warning class in `sessionstore.errors`), so a new one fails here until it has
an example, is exported from `sessionstore` and pickles.
"""

from __future__ import annotations

import builtins
import inspect
import pickle
import warnings
from pathlib import Path

import pytest

import sessionstore
from sessionstore import errors

EXAMPLES: list[errors.SessionStoreError] = [
    errors.InvalidId("Bad/Id", "session id", "^[a-z]$"),
    errors.InvalidInput("--constraints", "not JSON"),
    errors.RedactionUnsafe("more than 64 bytes before a secret ..."),
    errors.StreamFinished("feed"),
    errors.CorruptFile(Path("/s/session.json"), "not an object"),
    errors.StorageError("trials/1/trial.json", "a symlink is where a file belongs"),
    errors.TooLarge("trials/1/trial.json", 64 << 20),
    errors.Unavailable("trials/1/trial.json", "HTTP 503 Service Unavailable"),
    errors.SecretRefused("env HF_TOKEN", "too short"),
    errors.TemplateError("unknown variable 'x'", 2, 7, "t.md"),
    errors.SessionNotFound("abc", Path("/store")),
    errors.SessionNotFound("abc", Path("/store"), hint="write ./abc for a new directory"),
    errors.AmbiguousTarget("ab", Path("/store"), ["ab01", "ab02"]),
    errors.RecordNotFound(Path("/s/trials"), 3),
    errors.NoBestTrial(Path("/store/abc"), "benchmark.metrics.output_tok_per_s"),
    errors.SessionExists(Path("/store/abc")),
    errors.RecordCompleted(Path("/s/trials/1")),
    errors.SessionFinished(Path("/store/abc/report.json")),
    errors.SessionBusy(Path("/store/abc"), "writer", 42),
    errors.CollectionFull(Path("/s/trials"), 10**18 - 1),
    errors.PreviousRunning("abc"),
    errors.PreviousUnknown("abc", "pid is not an integer"),
    errors.LockHeld(Path("/dst/.lock"), 42),
    errors.DestinationLost(Path("/store/abc")),
    errors.WaitTimedOut(Path("/s/trials/1/trial.json"), 2.5),
]

WARNINGS: list[Warning] = [
    errors.LineageWarning("previous session abc has no records; nothing copied from it"),
]

_BUILTIN_ERRORS = {
    cls
    for cls in vars(builtins).values()
    if isinstance(cls, type) and issubclass(cls, Exception) and cls is not Exception
}


def _all_subclasses(cls: type) -> set[type]:
    found: set[type] = set(cls.__subclasses__())
    for sub in list(found):
        found |= _all_subclasses(sub)
    return found


def _error_classes() -> set[type]:
    return {errors.SessionStoreError, *_all_subclasses(errors.SessionStoreError)}


def _warning_classes() -> set[type]:
    members: list[tuple[str, type]] = inspect.getmembers(errors, inspect.isclass)
    return {
        cls for _, cls in members if issubclass(cls, Warning) and cls.__module__ == errors.__name__
    }


def _by_name(classes: set[type]) -> list[type]:
    named = {cls.__name__: cls for cls in classes}
    return [named[name] for name in sorted(named)]


def test_every_error_and_warning_class_has_an_example() -> None:
    assert {type(e) for e in EXAMPLES} == _error_classes() - {errors.SessionStoreError}
    assert {type(w) for w in WARNINGS} == _warning_classes()


@pytest.mark.parametrize("cls", _by_name(_error_classes() | _warning_classes()))
def test_each_is_exported_from_the_package(cls: type) -> None:
    assert getattr(sessionstore, cls.__name__) is cls
    assert cls.__name__ in sessionstore.__all__
    assert cls.__name__ in (errors.__doc__ or ""), "draw it in the tree of errors.py"


@pytest.mark.parametrize("cls", _by_name(_error_classes()))
def test_each_error_also_subclasses_a_builtin_a_caller_would_catch(cls: type) -> None:
    if cls is errors.SessionStoreError:
        return
    assert _BUILTIN_ERRORS & set(cls.__mro__), f"{cls.__name__} subclasses no built-in error"


@pytest.mark.parametrize("error", EXAMPLES, ids=lambda e: type(e).__name__)
def test_error_pickles_with_its_message_and_attributes(error: errors.SessionStoreError) -> None:
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert str(copy) == str(error)
    assert copy.args == error.args
    assert vars(copy) == vars(error)


@pytest.mark.parametrize("warning", WARNINGS, ids=lambda w: type(w).__name__)
def test_warning_pickles_and_is_a_user_warning(warning: Warning) -> None:
    assert isinstance(warning, UserWarning)
    copy = pickle.loads(pickle.dumps(warning))
    assert type(copy) is type(warning) and str(copy) == str(warning)
    with pytest.warns(type(warning), match="no records"):
        warnings.warn(warning, stacklevel=1)


def test_the_package_exports_exactly_its_lazy_table() -> None:
    exports = vars(sessionstore)["_EXPORTS"]
    assert sessionstore.__all__ == sorted([*exports, "__version__"])
    for name in exports:
        assert getattr(sessionstore, name) is not None, name
