"""The deployment `make compat` benchmarks with SGLang's bench_serving must start.

CI runs `make compat` after the suite; a reference deployment the simulator refuses (its fraction
left to SGLang's formula, which leaves Kimi-K2.5 no KV pool) failed CI there once, after the whole
suite had passed. This checks the same start-up plan in milliseconds, without the compat venv.
"""

from dataclasses import replace

import pytest

from harness.server.command import server_flags
from harness.sim.oracle import modelled_load
from sweep.compat.bench_serving import (
    CONCURRENCY,
    OUTPUT_LEN,
    SIM_FLAGS,
    reference_server,
)


def test_the_benchmarked_reference_deployment_starts_and_sets_its_fraction():
    server = reference_server(30000)
    assert server.mem_fraction_static is not None, "every launch sets its memory (issue 27)"
    load = modelled_load([*server_flags(server), *SIM_FLAGS], CONCURRENCY, ["x " * 100], OUTPUT_LEN)
    assert load.output_tok_s > 0


def test_left_to_sglangs_formula_the_same_deployment_would_not_start():
    server = replace(reference_server(30000), mem_fraction_static=None)
    with pytest.raises(ValueError, match="no_kv_room"):
        modelled_load([*server_flags(server), *SIM_FLAGS], CONCURRENCY, ["x " * 100], OUTPUT_LEN)
