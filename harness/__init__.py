"""Launch SGLang (or its simulator), benchmark it, and describe the result: one trial, end to end.

No Hydra, Optuna or MLflow in here: the harness takes frozen specs and returns typed records.

spec            frozen, validated specs: engine, server, trial (re-exports the two below)
benchmark_spec  how a trial is measured, frozen: the benchmark (runs, levels, prompts), early stop
trial           run_trial(): the recipe, one call per step
drafter_gate    the drafter checks before a launch, with their verdict cache
errors          the typed errors, one root
tls             one TLS context per process for every httpx client
sglang          SGLang's facts per version (a leaf: the simulator reads it too)
server          the server process and what it is launched with
measure         warm-up, flush, measured runs per level, and what they mean
workload        the prompts: bundled, or a user's file in the formats they have
record          what a trial leaves behind: results, the folder layout, labels, statistics
sim             the simulator, SGLang's stand-in, started as a process like SGLang
data            the bundled prompt sets (built by tools/build_workload.py)
"""
