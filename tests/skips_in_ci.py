"""Where a skip means CI did not build what a folder of tests needs (tests/compat: the compat
environment; tests/real: the real-engine environment and the tiny models), a skip under CI
(CI=true) is a broken pipeline, not a reason to pass: `fail_skip_in_ci` turns it into a failure
that names the build step. On a developer's machine a skip stays a skip, naming the command."""

from __future__ import annotations

import os

# The values CI systems set (GitHub Actions, GitLab, and `.ci/run`'s callers) mean "in CI";
# an unset, empty, "0" or "false" CI does not.
_NOT_CI = {"", "0", "false", "no"}


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in _NOT_CI


def fail_skip_in_ci(report, folder: str, build: str) -> None:
    """A conftest's pytest_runtest_makereport: `report` failed in place of a skip under CI."""
    if report.skipped and in_ci() and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = (
            f"skipped under CI=true, which {folder} does not allow: {reason}. CI must build "
            f"{build} first, as .ci/run does."
        )
