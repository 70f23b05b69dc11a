"""A configuration SGLang refuses is launched twice (the first crash may be flaky), then never.

The simulator refuses topk > 1 with `--attention-backend trtllm_mha` at start-up, with SGLang's
own ValueError (0.5.23 arg_groups/speculative_hook.py), like SGLang: a deterministic crash for a
region of the space.
"""

from __future__ import annotations

import json

import optuna
import pytest
from optuna.trial import TrialState

from harness.server.procs import free_port
from tests.e2e.test_sweep_cli import sweep

pytestmark = pytest.mark.e2e

# topk 1 runs, topk 2 is refused; everything else fixed, so topk=2 is one candidate.
SPACE = (
    "search.space={speculative_num_steps:{type:categorical,choices:[2]},"
    "speculative_eagle_topk:{type:categorical,choices:[1,2]},"
    "speculative_num_draft_tokens:{type:int,low:4,high:4},"
    "mem_fraction_static:{type:categorical,choices:[0.85]},"
    "hicache_size:{type:categorical,choices:[0]}}"
)
# Three proposals of the same candidate (different key sets: Optuna skips an identical enqueue).
REFUSED = (
    "search.enqueue=[{speculative_eagle_topk:2},"
    "{speculative_eagle_topk:2,speculative_num_steps:2},"
    "{speculative_eagle_topk:2,speculative_num_steps:2,mem_fraction_static:0.85}]"
)
N_TRIALS = 6


def test_a_configuration_that_crashed_twice_is_never_launched_again(tmp_path):
    port = free_port()
    proc = sweep(
        tmp_path,
        port,
        SPACE,
        REFUSED,
        f"search.n_trials={N_TRIALS}",
        "search.remeasure_baseline=false",
        "search.sampler.name=tpe",  # TPE re-proposes the crashed configuration; the model never
        "server.extra_args=['--attention-backend','trtllm_mha']",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    study_dir = tmp_path / "kimi-k25-eagle3"
    results = {
        n: json.loads((study_dir / f"trial_{n:04d}" / "result.json").read_text())
        for n in range(N_TRIALS)
    }
    launched = {n for n in results if (study_dir / f"trial_{n:04d}" / "server.log").exists()}
    # First and second identical crash: launched, with SGLang's own text as the cause.
    for n in (0, 1):
        assert results[n]["outcome"] == "crash", results[n]
        assert n in launched
    log = (study_dir / "trial_0000" / "server.log").read_text()
    assert "ValueError: trtllm_mha backend only supports topk = 1" in log
    # Third: not launched, named after the crash it repeats.
    assert results[2]["outcome"] == "known_crash"
    assert 2 not in launched
    assert results[2]["related"] == "trial_0001"
    assert "trtllm_mha backend only supports topk = 1" in results[2]["error"]

    study = optuna.load_study(
        study_name="kimi-k25-eagle3", storage=f"sqlite:///{tmp_path}/optuna.db"
    )
    trials = study.get_trials(deepcopy=False)
    refused_key = trials[0].user_attrs["candidate_key"]
    assert trials[1].user_attrs["candidate_key"] == refused_key
    # The first crash may be flaky: a failure. From the repeat on the group is infeasible.
    assert trials[0].state == TrialState.FAIL
    for t in trials[1:3]:
        assert t.state == TrialState.COMPLETE and t.constraints == {"crash": 1.0}
    # Whatever the sampler proposed afterwards, the refused configuration never ran again.
    refused_launches = [
        t.number
        for t in trials
        if t.user_attrs["candidate_key"] == refused_key and t.number in launched
    ]
    assert refused_launches == [0, 1]
    for t in trials[3:]:
        if t.user_attrs["candidate_key"] == refused_key:
            assert t.user_attrs["outcome"] == "known_crash"
            assert t.constraints == {"crash": 1.0}
        else:
            assert t.user_attrs["outcome"] in ("ok", "duplicate")
    assert "known_crash" in proc.stdout
