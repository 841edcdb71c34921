"""Both matching engines: a module that imports `engine` and uses it runs once under each.

    from redact_engines import engine  # noqa: F401  (a fixture, used by name)
    pytestmark = pytest.mark.usefixtures("engine")

The redactor's detector is Hyperscan for many needles (over the needles, or
over their prefixes past a few thousand) and an Aho-Corasick automaton for a
few (or where Hyperscan is missing); the small inputs of these tests would
all take the last. Forcing each engine runs every law and leak case
against both, since either may be the one a given set of secrets gets.
Module scope, so hypothesis tests can use it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from sessionstore.redact import matcher


def force(name: str, setattr: Callable[[Any, str, Any], None]) -> None:
    """Make the redactor pick engine `name`; `setattr` is a monkeypatch's, or the builtin
    in a fresh interpreter (a test that measures one there)."""
    if name == "ahocorasick":
        setattr(matcher, "load", lambda patterns, widths: None)
    else:
        setattr(matcher, "_PREFILTER_MAX_PREFIXES", 0)
    if name == "hyperscan-prefixes":
        setattr(matcher, "_HS_MAX_NEEDLES", 0)


@pytest.fixture(scope="module", params=["ahocorasick", "hyperscan", "hyperscan-prefixes"])
def engine(request: pytest.FixtureRequest) -> Iterator[str]:
    with pytest.MonkeyPatch.context() as patch:
        force(request.param, patch.setattr)
        yield request.param
