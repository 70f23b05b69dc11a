"""Under CI (CI=true) a skipped test here is a failure: these tests are the only ones that run
SGLang's own code (its adaptive-config loader), and a skip means the compat environment was not
built, which in CI is a broken pipeline, not a reason to pass. `.ci/run` builds .venv-compat
(`make compat-env`) before `make test`. On a developer's machine a skip stays a skip, with the
command that builds the environment as its reason."""

from __future__ import annotations

import pytest

from tests.skips_in_ci import fail_skip_in_ci


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    fail_skip_in_ci(
        outcome.get_result(), "tests/compat", "the compat environment (`make compat-env`)"
    )
