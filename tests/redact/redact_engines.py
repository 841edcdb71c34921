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

from collections.abc import Iterator

import pytest

from sessionstore.redact import matcher


@pytest.fixture(scope="module", params=["ahocorasick", "hyperscan", "hyperscan-prefixes"])
def engine(request: pytest.FixtureRequest) -> Iterator[str]:
    with pytest.MonkeyPatch.context() as patch:
        if request.param == "ahocorasick":
            patch.setattr(matcher, "load", lambda patterns, widths: None)
        else:
            patch.setattr(matcher, "_PREFILTER_MAX_PREFIXES", 0)
        if request.param == "hyperscan-prefixes":
            patch.setattr(matcher, "_HS_MAX_NEEDLES", 0)
        yield request.param
