"""The house rules that import contracts (.importlinter, run by `make test`) cannot express.

- A module over 400 lines is a smell: it usually holds more than one idea. The check makes you
  look; split where an idea ends (or merge back what is one idea), never only to get under it.
- Optuna's private API (`optuna.storages._heartbeat`, `study._storage`, `trial._trial_id`) is
  used in one module only, `sweep/study/loop/optuna_storage.py`, which says why; an Optuna upgrade
  that changes it then breaks one file, not the sweep.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = (
    "specsweep",
    "harness",
    "sweep",
    "analysis",
    "drafter",
    "hydra_plugins",
    "benchmarks",
    "tools",
)
MAX_LINES = 400
OPTUNA_PRIVATE = re.compile(r"optuna\.\w+(\.\w+)*\._\w+|\._storage\b|\._trial_id\b|_heartbeat\b")
OPTUNA_PRIVATE_HOME = ROOT / "sweep" / "study" / "loop" / "optuna_storage.py"


def project_modules() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def test_the_rules_see_the_project():
    modules = project_modules()
    assert len(modules) > 50
    assert OPTUNA_PRIVATE_HOME in modules


@pytest.mark.parametrize("path", project_modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_is_over_400_lines(path: Path):
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, (
        f"{path.relative_to(ROOT)} has {lines} lines: does it hold more than one idea? Split it "
        "where an idea ends"
    )


def test_optunas_private_api_lives_in_one_module():
    users = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in project_modules()
        if path != OPTUNA_PRIVATE_HOME
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if OPTUNA_PRIVATE.search(line) and not line.lstrip().startswith("#")
    ]
    assert users == []
    assert OPTUNA_PRIVATE.search(OPTUNA_PRIVATE_HOME.read_text())  # the one home is still it
