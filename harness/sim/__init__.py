"""A stand-in for `sglang.launch_server` that runs on a CPU.

It accepts SGLang's command line, serves SGLang's HTTP surface, prints SGLang's log lines and
derives speed, accept length and OOM from its performance model. It is a test bed and a dry-run
engine: everything it produces is simulated, and it says so in `/server_info` (`simulator`).

__main__  `python -m harness.sim <sglang flags>`
main      start-up as SGLang does it (weights, KV pool, graphs, ready), then serve
progress  start-up's tqdm bars (redrawn with \\r) and graph-capture progress, as SGLang prints
cli       both surfaces' flags, and SGLang's automatic adjustments
cpu_device  --device cpu: SGLang's CPU engine (backend, graphs, no speculation), as it shows it
fraction_default  0.5.23's mem_fraction_static when the flag is unset
oracle    the model's answer for one launch, computed in-process (start-up and benchmarks)
engine    the scheduler: continuous batching on a virtual clock, prefill first
request   a simulated request and the counters the scheduler keeps
intake    a new request: its prompt's token ids, natural length and acceptance factor
loglines  the scheduler's log lines, per surface
clock     the virtual clock: clock_scale virtual seconds per wall second
text      deterministic stand-in text
faults    faults on demand (--sim-fault) for tests and benchmarks/faults.py
failures  how SGLang dies: its texts and exit codes
unmodelled  launches SGLang runs that the simulator refuses, saying it does not model them
shutdown  the launcher's process tree and SIGTERM path, as SGLang has them
api       the HTTP surface
capacity  the KV pool, prefix cache, HiCache, admission and retraction
model     the performance model, its constants, drift, the adaptive step policy
"""
