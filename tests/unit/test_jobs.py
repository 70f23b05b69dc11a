"""The one job path: a job that fails outside the harness still leaves its record on disk."""

from __future__ import annotations

import json

from omegaconf import OmegaConf

from harness.results import Outcome
from sweep.console import ConsoleReporter
from sweep.jobs import Jobs, override_value


class Loader:
    """Hydra's config loader, reduced to what Jobs asks of it."""

    def __init__(self, job_cfg=None, error: Exception | None = None):
        self.job_cfg, self.error, self.calls = job_cfg, error, []

    def load_sweep_config(self, config, overrides):
        self.calls.append(overrides)
        if self.error is not None:
            raise self.error
        return self.job_cfg


def sweep_config(tmp_path, **job):
    return OmegaConf.create(
        {
            "hydra": {"sweep": {"dir": str(tmp_path / "study"), "subdir": "${trial.name}"}},
            "engine": {"name": "sim"},
            "trial": {"name": "trial_0007", "role": "trial", **job},
        }
    )


def test_a_job_that_raises_becomes_an_error_result_in_its_folder(tmp_path):
    # No benchmark/server groups: the job raises inside run_job, past its config.yaml.
    job_cfg = sweep_config(tmp_path)
    jobs = Jobs(Loader(job_cfg), sweep_config(tmp_path))
    result = jobs.run(["trial.name=trial_0007"], ConsoleReporter(simulated=True))
    folder = tmp_path / "study" / "trial_0007"
    assert result.outcome is Outcome.ERROR and result.folder == str(folder)
    recorded = json.loads((folder / "result.json").read_text())
    assert recorded["outcome"] == "error" and recorded["name"] == "trial_0007"
    assert (folder / "config.yaml").is_file()  # written by the job before it failed
    assert "job failed" in (folder / "trial.log").read_text()  # with its traceback


def test_a_job_whose_config_does_not_compose_is_recorded_where_it_would_run(tmp_path):
    jobs = Jobs(Loader(error=RuntimeError("loader broke")), sweep_config(tmp_path))
    result = jobs.run(["trial.name=trial_0003"], ConsoleReporter(simulated=True))
    folder = tmp_path / "study" / "trial_0003"
    assert result.outcome is Outcome.ERROR and "loader broke" in result.error
    assert json.loads((folder / "result.json").read_text())["outcome"] == "error"


def test_the_last_override_of_a_key_wins():
    assert override_value(["trial.name=a", "x=1", "trial.name=b"], "trial.name") == "b"
    assert override_value(["x=1"], "trial.name") is None
