"""The launch tests' fixture for a plan with a stand-in trainer
(support/launch_stand_in.py)."""

import pytest

from support.launch_stand_in import make_plan


@pytest.fixture
def plan_of(tmp_path):
    """make_plan bound to this test's folder."""
    return lambda kind="ok", **kw: make_plan(tmp_path, kind, **kw)
