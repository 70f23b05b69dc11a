"""The one job path: a job that fails outside the harness still leaves its record on disk."""

from __future__ import annotations

import json

import pytest
from omegaconf import OmegaConf

from harness.record.results import Outcome
from sweep.launch.jobs import Jobs, override_value
from sweep.readout.trial_lines import ConsoleReporter


class Repository:
    def group_exists(self, key: str) -> bool:
        return False


class Loader:
    """Hydra's config loader, reduced to what Jobs asks of it."""

    def __init__(self, job_cfg=None, error: Exception | None = None):
        self.job_cfg, self.error, self.calls = job_cfg, error, []
        self.repository = Repository()

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


def test_a_remembered_composition_is_the_one_hydra_would_make():
    """Jobs.compose remembers a composition by its non-trial overrides: a duplicate or a launch
    with early-stop values gets a copy with its own trial.* values, equal to what Hydra's loader
    composes from scratch, and changing the copy leaves the remembered one alone."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra._internal.utils import create_config_search_path
    from hydra.types import RunMode

    from sweep.launch.app import CONF_DIR
    from sweep.launch.jobs import task_config

    loader = ConfigLoaderImpl(config_search_path=create_config_search_path(CONF_DIR))
    sweep_cfg = loader.load_configuration(
        "config", overrides=["experiment=smoke"], run_mode=RunMode.MULTIRUN
    )
    jobs = Jobs(loader, sweep_cfg)
    values = ["server.speculative_num_steps=2", "drafter=kimi_k25_eagle3_10k"]
    first = [*values, "trial.name=trial_0001", "trial.number=1", "trial.role=trial"]
    later = [*values, "trial.name=trial_0004", "trial.number=4", "trial.role=trial",
             "trial.prune_below=81.5000", "trial.prune_concurrency=1"]  # fmt: skip
    jobs.compose(later)  # remembered first with early-stop values, which `first` must not inherit
    calls = []
    original = loader.load_sweep_config
    loader.load_sweep_config = lambda *a, **k: calls.append(a) or original(*a, **k)
    remembered = jobs.compose(later)
    again = jobs.compose(first)
    assert calls == []  # no second composition
    fresh = ConfigLoaderImpl(config_search_path=create_config_search_path(CONF_DIR))
    expected = fresh.load_sweep_config(sweep_cfg, list(later))
    as_dict = OmegaConf.to_container
    assert as_dict(task_config(remembered), resolve=True) == as_dict(
        task_config(expected), resolve=True
    )
    assert remembered.trial.number == 4 and remembered.trial.prune_below == 81.5
    assert remembered.drafter.name == expected.drafter.name  # the group the values selected
    assert str(remembered.hydra.sweep.subdir) == "trial_0004"
    assert list(remembered.hydra.overrides.task) == list(expected.hydra.overrides.task)
    assert again.trial.name == "trial_0001" and again.trial.prune_below is None
    assert str(again.hydra.sweep.subdir) == "trial_0001"
    with pytest.raises(Exception, match=r"trial\.number"):  # a bad value is refused, as by Hydra
        jobs.compose([*values, "trial.number=many"])


def test_only_a_new_group_selection_is_composed_again():
    """Trials in GPU slots differ in their searched values and their slot's port, which select no
    file: Hydra applies them over the composed defaults tree, and so does Jobs.compose over the
    remembered one; a value that selects a file (a drafter) composes anew. Each equals what
    Hydra's loader composes from scratch, a dict value merged as Hydra merges it."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra._internal.utils import create_config_search_path
    from hydra.types import RunMode

    from sweep.launch.app import CONF_DIR
    from sweep.launch.jobs import task_config

    loader = ConfigLoaderImpl(config_search_path=create_config_search_path(CONF_DIR))
    sweep_cfg = loader.load_configuration(
        "config", overrides=["experiment=single_gpu"], run_mode=RunMode.MULTIRUN
    )
    jobs = Jobs(loader, sweep_cfg)
    calls = []
    original = loader.load_sweep_config
    loader.load_sweep_config = lambda *a, **k: calls.append(list(a[1])) or original(*a, **k)
    plan = ["hardware.gpus=4", "search.space={hicache_size:{type:categorical,choices:[0]}}"]
    jobs_of = [
        [*plan, "server.speculative_num_steps=2", "trial.name=trial_0000", "server.port=30001"],
        [*plan, "server.speculative_num_steps=5", "trial.name=trial_0001", "server.port=30002",
         "server.speculative_eagle_topk=2", "server.mem_fraction_static=0.7"],
        [*plan, "drafter=none", "trial.name=baseline", "server.port=30003"],
    ]  # fmt: skip
    composed = [jobs.compose(o) for o in jobs_of]
    assert calls == [[], ["drafter=none"]]  # the defaults tree: once per group selection
    fresh = ConfigLoaderImpl(config_search_path=create_config_search_path(CONF_DIR))
    as_dict = OmegaConf.to_container
    for overrides, job in zip(jobs_of, composed, strict=True):
        expected = fresh.load_sweep_config(sweep_cfg, list(overrides))
        assert as_dict(task_config(job), resolve=True) == as_dict(
            task_config(expected), resolve=True
        )
        assert list(job.hydra.overrides.task) == list(expected.hydra.overrides.task)
    assert composed[1].server.port == 30002 and composed[1].server.speculative_num_steps == 5
    assert set(composed[0].search.space) > {"hicache_size"}  # merged into the space, not replacing
    with pytest.raises(Exception, match=r"server\.port"):  # a bad value is refused, as by Hydra
        jobs.compose([*plan, "server.port=many"])
