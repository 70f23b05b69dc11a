"""The banner says, briefly, what a sweep measures: the workload's mix, the sampling, how
prompts are drawn, and what a run is at each level."""

from harness.spec import BenchmarkSpec
from harness.workload import Prompt
from sweep.readout.banner import runs_line, workload_line


def prompts(*categories: str) -> list[Prompt]:
    return [
        Prompt(f"p{i}", ({"role": "user", "content": "q"},), c) for i, c in enumerate(categories)
    ]


def test_the_workload_line_names_the_mix_the_sampling_and_the_draw():
    spec = BenchmarkSpec(model="m", temperature=1.0, top_p=0.95, sampling_source="model.sampling")
    line = workload_line(spec, prompts("math", "math", "code"))
    assert line.startswith("workload reasoning: 3 prompts (math 2, code 1); sampled, temperature 1")
    assert "top_p 0.95, from model.sampling" in line
    assert "warm-up prompts never measured" in line and "run r the same in every trial" in line
    assert "greedy" in workload_line(BenchmarkSpec(model="m", temperature=0.0), prompts("x"))


def test_the_runs_line_says_what_a_run_is_at_each_level():
    spec = BenchmarkSpec(model="m", concurrency=(1, 8), requests_per_run=3, warmup=2, runs=5)
    line = runs_line(spec)
    assert line.startswith("2 warm-up + 5 runs per level of up to 2048 tokens")
    assert "C=1: 3 requests one after another" in line
    assert f"C=8: 8 in flight, a window of {spec.window_at(8)} completions" in line


def test_the_workload_line_and_summary_name_a_level_whose_runs_share_prompts():
    from sweep.readout.banner import prompt_reuse

    s = BenchmarkSpec(model="m", warmup=2, runs=5, concurrency=(1, 64), requests_per_run=3)
    few = [Prompt(id=f"p{i}", messages=({"role": "user", "content": f"q{i}"},)) for i in range(600)]
    line = workload_line(s, few)
    assert "except at C=64 the workload holds 3 disjoint runs of 191 prompts" in line
    assert "runs 4-5 send earlier runs' prompts again" in line
    assert prompt_reuse(s, few) == {"64": {"runs": 5, "disjoint_runs": 3, "prompts_per_run": 191}}
    enough = few + [
        Prompt(id=f"x{i}", messages=({"role": "user", "content": f"x{i}"},)) for i in range(400)
    ]
    assert "each run its own prompts, run r" in workload_line(s, enough)
    assert prompt_reuse(s, enough) == {}
