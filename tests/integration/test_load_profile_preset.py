"""experiment=load_profile composes into a per-level answer: the objective reads every level the
benchmark measures, the ranking (trials table, Best:) uses the same objective, the study is its
own (not mixed into the default one), answers end at their own length (equal lengths would put
the slots in waves: docs/benchmark.md), and the stream interval reaches SGLang's command line.
Each assertion checks what the code derives from the preset, not the preset's literal values."""

from __future__ import annotations

from hydra import compose, initialize_config_dir

from harness.server.command import server_flags
from sweep.config.specs import build_trial_spec
from sweep.launch.app import CONF_DIR
from sweep.readout.ranking import for_objective
from sweep.study.trial.objective import Objective


def composed(*overrides: str):
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


def test_load_profile_ranks_every_measured_level_by_one_objective_in_a_study_of_its_own():
    c = composed("experiment=load_profile", "hardware=8x_h200")
    spec = build_trial_spec(c)
    b = spec.benchmark
    objective = Objective.from_config(c.search, c.benchmark)
    assert len(b.concurrency) > 1 and objective.levels == list(b.concurrency)
    assert for_objective(objective).metric == objective.name  # the table and Best: rank by it
    assert c.search.study_name != composed().search.study_name
    assert not b.ignore_eos and b.thinking  # lengths of their own, not one cut for all
    flags = server_flags(spec.server)
    assert flags[flags.index("--stream-interval") + 1] == str(spec.server.stream_interval)
