"""experiment=load_profile composes into the per-level answer issue 18 asks for: every level on
one server start, ranked by weighted output throughput, with answers of their own length (equal
lengths would put the slots in waves: docs/benchmark.md) and a clock this machine keeps up with."""

from __future__ import annotations

from hydra import compose, initialize_config_dir

from harness.server.command import server_flags
from sweep.config.specs import build_trial_spec
from sweep.launch.app import CONF_DIR
from sweep.readout.ranking import for_objective
from sweep.study.objective import Objective


def test_load_profile_measures_four_levels_and_ranks_by_their_weighted_throughput():
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        c = compose(config_name="config", overrides=["experiment=load_profile", "hardware=8x_h200"])
    spec = build_trial_spec(c)
    b = spec.benchmark
    assert b.concurrency == (1, 8, 32, 64)
    assert not b.ignore_eos and b.thinking and b.max_tokens >= 2048  # lengths of their own
    objective = Objective.from_config(c.search, c.benchmark)
    assert objective.name == "weighted_throughput" and objective.levels == [1, 8, 32, 64]
    assert for_objective(objective).metric == "weighted_throughput"  # the table and Best: too
    assert c.search.study_name == "kimi-k25-load-profile"  # not mixed into the default study
    assert c.engine.clock_scale <= 5  # at 20 the server held ~44 of 64 in flight
    flags = server_flags(spec.server)
    assert flags[flags.index("--stream-interval") + 1] == "16"
