"""Under CI (CI=true) a skipped test here is a failure: these tests are the only ones that run
SGLang's own code (its adaptive-config loader), and a skip means the compat environment was not
built, which in CI is a broken pipeline, not a reason to pass. `.ci/run` builds .venv-compat
(`make compat-env`) before `make test`. On a developer's machine a skip stays a skip, with the
command that builds the environment as its reason."""

from __future__ import annotations

import os

import pytest

# The values CI systems set (GitHub Actions, GitLab, and `.ci/run`'s callers) mean "in CI";
# an unset, empty, "0" or "false" CI does not.
_NOT_CI = {"", "0", "false", "no"}


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in _NOT_CI


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and in_ci() and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = (
            f"skipped under CI=true, which tests/compat does not allow: {reason}. "
            "CI must build the compat environment first (`make compat-env`, as .ci/run does)."
        )
