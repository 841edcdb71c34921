"""Every error in the tree pickles with its message and attributes (multiprocessing callers)."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from sessionstore import errors

EXAMPLES: list[errors.SessionStoreError] = [
    errors.InvalidId("Bad/Id", "session id", "^[a-z]$"),
    errors.InvalidInput("--constraints", "not JSON"),
    errors.RedactionUnsafe("more than 64 bytes before a secret ..."),
    errors.CorruptFile(Path("/s/session.json"), "not an object"),
    errors.StorageError("trials/1/trial.json", "a symlink is where a file belongs"),
    errors.TooLarge("trials/1/trial.json", 64 << 20),
    errors.SecretRefused("env HF_TOKEN", "too short"),
    errors.TemplateError("unknown variable 'x'", 2, 7, "t.md"),
    errors.SessionNotFound("abc", Path("/store")),
    errors.RecordNotFound(Path("/s/trials"), 3),
    errors.SessionExists(Path("/store/abc")),
    errors.RecordCompleted(Path("/s/trials/1")),
    errors.CollectionFull(Path("/s/trials"), 10**18 - 1),
    errors.PreviousRunning("abc"),
    errors.PreviousUnknown("abc", "pid is not an integer"),
    errors.LockHeld(Path("/dst/.lock"), 42),
    errors.WaitTimedOut(Path("/s/trials/1/trial.json"), 2.5),
]


def _all_subclasses(cls: type) -> set[type]:
    found = set(cls.__subclasses__())
    for sub in list(found):
        found |= _all_subclasses(sub)
    return found


def test_every_error_class_has_an_example() -> None:
    assert {type(e) for e in EXAMPLES} == _all_subclasses(errors.SessionStoreError)


@pytest.mark.parametrize("error", EXAMPLES, ids=lambda e: type(e).__name__)
def test_error_pickles_with_its_message_and_attributes(error: errors.SessionStoreError) -> None:
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert str(copy) == str(error)
    assert copy.args == error.args
    assert vars(copy) == vars(error)
