"""Shared test setup: hypothesis profiles.

`ci` (selected by CI=true, as .ci/run sets) runs enough examples to mean
something while keeping the whole suite within CI's budget; `dev` is quicker
for local iteration. Override with HYPOTHESIS_PROFILE.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.register_profile("dev", max_examples=50, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


@pytest.fixture
def src(tmp_path: Path) -> Path:
    """A mirror source path, not created (modules that need a populated tree override it)."""
    return tmp_path / "src"


@pytest.fixture
def dst(tmp_path: Path) -> Path:
    """A mirror destination path, not created."""
    return tmp_path / "dst"
