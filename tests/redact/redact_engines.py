"""Both matching engines: a module that imports `engine` and uses it runs once under each.

    from redact_engines import engine  # noqa: F401  (a fixture, used by name)
    pytestmark = pytest.mark.usefixtures("engine")

The redactor picks Hyperscan for many needles and the Aho-Corasick automata
for a few (or where Hyperscan is missing); the small inputs of these tests
would all take the second. Forcing each engine runs every law and leak case
against both, since either may be the one a given set of secrets gets.
Module scope, so hypothesis tests can use it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sessionstore.redact import matcher


@pytest.fixture(scope="module", params=["ahocorasick", "hyperscan"])
def engine(request: pytest.FixtureRequest) -> Iterator[str]:
    with pytest.MonkeyPatch.context() as patch:
        if request.param == "hyperscan":
            patch.setattr(matcher, "_PREFILTER_MAX_PREFIXES", 0)
        else:
            patch.setattr(matcher, "load", lambda needles: None)
        yield request.param
