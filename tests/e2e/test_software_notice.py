"""The banner says when a study's earlier trials were measured on other software."""

from __future__ import annotations

import json
import sqlite3

import pytest

from harness.server.procs import free_port
from sweep.tracking import provenance
from tests.e2e.test_sweep_cli import sweep

pytestmark = pytest.mark.e2e


def test_the_banner_names_trials_measured_on_other_software(tmp_path):
    port = free_port()
    first = sweep(tmp_path, port, "search.n_trials=2", "search.remeasure_baseline=false")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "other software" not in first.stdout
    # The same study again: the same software, nothing to say.
    again = sweep(tmp_path, port, "search.n_trials=0", "search.remeasure_baseline=false")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "other software" not in again.stdout
    # Trial 0 as if measured by an older simulator (what an upgrade leaves in the study).
    with sqlite3.connect(tmp_path / "optuna.db") as db:
        (current,) = db.execute(
            "SELECT value_json FROM trial_user_attributes a JOIN trials t USING (trial_id) "
            "WHERE t.number = 0 AND a.key = 'software'"
        ).fetchone()
        assert json.loads(current) == {"simulator": provenance._version("specsweep")}
        db.execute(
            "UPDATE trial_user_attributes SET value_json = ? WHERE key = 'software' AND "
            "trial_id = (SELECT trial_id FROM trials WHERE number = 0)",
            (json.dumps({"simulator": "0.0.1"}),),
        )
    later = sweep(tmp_path, port, "search.n_trials=0", "search.remeasure_baseline=false")
    assert later.returncode == 0, later.stdout + later.stderr
    notice = next(line for line in later.stdout.splitlines() if "other software" in line)
    assert f"trial 0 (simulator 0.0.1 -> {provenance._version('specsweep')})" in notice
    assert "trial 1" not in notice
